//! The one acquire loop every waiting object runs, over any [`Protocol`].
//!
//! try → subscribe → loop { arm the wake-up, try again, wait for min(retry-in, remaining) or a
//! message }; a protocol that does not subscribe (the spin lock) sleeps its back-off instead.
//!
//! **A wait limit is a deadline.** Every attempt, retry, reconnect and response wait inside it is
//! raced against what is left: when the deadline passes, the acquire returns `TimedOut` at once,
//! even if Redis has not answered. An attempt still in flight then is *abandoned*: it finishes in
//! the background, and if it won, the win is given back (then the protocol's give-up clean-up
//! runs). A wait of zero is a single attempt, bounded as a whole (with any clean-up of this
//! client's earlier calls it waits for, and any reconnecting) by the response timeout from its
//! start.
//!
//! **An outage is not "busy".** A wait that reaches its limit without Redis having answered any
//! of its attempts, or whose last call to Redis failed for want of it, ends with
//! [`ErrorKind::Unavailable`] (settled: what an abandoned attempt won is given back), not
//! `TimedOut`; `TimedOut` (the caller's timeout error, naming the holder) means Redis answered
//! and the object was busy. An attempt still in flight at the deadline counts if it is answered
//! within the clean-up grace. Silence alone (no call failed, none answered) is an outage only in
//! a wait of at least [`SILENCE_FLOOR`]; waiting for this client's own clean-ups is one only
//! while the connection is down.
//!
//! **Cancellation leaves nothing behind.** The first attempt runs inline (most acquires end
//! there); the rest of the loop runs as its own task. Dropping the caller's future, or cancelling
//! its token, stops the loop at once; an attempt in flight finishes in the background and its
//! win, if any, is given back; a win the caller never saw (it left just as the loop won) is given
//! back too. Giving back always returns exactly the one win this acquire took: a cancelled
//! re-entrant acquire leaves the caller's outer hold in place. Then the give-up clean-up runs
//! (the fair lock leaves its queue), so a cancelled or timed-out wait leaves no win, no queue
//! entry and no subscription.
//!
//! **Outages.** An attempt whose reply is lost (the connection dropped, the server restarted) is
//! ambiguous: it may have won. Before trying again the loop asks Redis ([`Protocol::settle`]), so
//! a win is never counted twice. An attempt that was never sent (a refused connection) is not
//! ambiguous: it is simply tried again. Such outages are waited out, with back-off, for up to the
//! client's connect timeout (and never past the deadline); a longer one ends the wait with
//! [`ErrorKind::Unavailable`]. A `SUBSCRIBE` that gets no answer is sent again the same way. An
//! object whose attempts cannot be settled (the plain semaphore) fails only on a reply lost after
//! sending; after its subscription connection dropped (a restart), it waits until Redis answers
//! a `PING` before its next attempt, so that attempt does not go out on the dead connection.
//!
//! The loop is here; beside it, [`in_flight`] holds one attempt in flight (and the caller's side
//! of the acquire task), [`settle`] what settles an attempt whose reply was lost, and [`herd`]
//! the pause of a waiter that keeps losing the race after a release.

mod herd;
mod in_flight;
mod settle;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::session::Ctx;
use crate::telemetry::{Event, WakeCause};
use crate::util::{RetryPause, lock, sleep_until};

use super::{Attempt, Protocol, Request, Waiting, WakePolicy};
use herd::LostRaces;
use in_flight::Call;
use settle::settle_unanswered;

/// Waits until the clean-ups this client's callers left running for object `name` are done (see
/// [`Settling`](super::settling::Settling)): a win of a cancelled acquire still being given back
/// would otherwise refuse or count against the same owner's next acquire. Waits at most until
/// `deadline` and in any case no longer than a clean-up can take (an outage waited out, a few
/// round trips); a cancel or the client's close ends it early (the caller then sees either).
/// `false` when the deadline has passed.
pub(crate) async fn after_clean_ups(
    cx: &Ctx,
    name: &str,
    deadline: Option<Instant>,
    cancel: Option<&CancellationToken>,
) -> bool {
    let cap = Instant::now() + cx.outage_tolerance + 2 * cx.response_timeout();
    let until = deadline.map_or(cap, |d| d.min(cap));
    let cancelled = async {
        match cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancelled => {}
        () = cx.stop.cancelled() => {}
        _ = cx.settling.wait(name, until) => {}
    }
    deadline.is_none_or(|d| Instant::now() < d)
}

/// How an acquire ended, short of an error.
pub(crate) enum Outcome<W> {
    Won(W),
    TimedOut,
}

/// What the loop does with a win, for one family of objects (the lock family records holds).
pub(crate) trait Keeper<W>: Send + Sync + 'static {
    /// Records a win whose winning attempt was sent at `sent`; `false` when it can no longer be
    /// kept (the client closed): the loop then gives it back.
    fn keep(&self, won: &W, sent: Instant) -> bool;
    /// How many wins of this caller this process records (to settle an unanswered attempt).
    fn recorded(&self) -> usize;
    /// The lease to leave on the object when a win that was never kept is given back.
    fn lease_after(&self) -> Duration;
    /// Gives back one win that was kept, whose caller left before it saw it.
    fn unkeep(self: Arc<Self>) -> BoxFuture<'static, ()>;
}

/// What Redis said during one wait, to tell an outage from a busy object when the wait limit
/// passes (see the module docs).
#[derive(Default)]
struct Heard {
    /// Some attempt of this wait got an answer from Redis (won or busy).
    answered: AtomicBool,
    /// What the last call of this wait to Redis failed with, if it failed for want of Redis
    /// (unreachable, no answer) and nothing answered since.
    outage: Mutex<Option<String>>,
}

impl Heard {
    /// Notes how a call of this wait ended; `attempt`: it was an attempt (an answer to a settle
    /// or a subscribe only says Redis is back).
    fn note<T>(&self, result: &Result<T>, attempt: bool) {
        match result {
            Err(e) if e.is_unavailable() => self.down(e),
            Err(_) => {}
            Ok(_) => {
                if attempt {
                    self.answered.store(true, Ordering::Relaxed);
                }
                *lock(&self.outage) = None;
            }
        }
    }

    /// Notes a call of this wait that failed for want of Redis.
    fn down(&self, e: &Error) {
        *lock(&self.outage) = Some(e.message().to_owned());
    }

    /// Why the wait is to end as an outage rather than a timeout: the last call failed for want
    /// of Redis, or no attempt was answered in a wait of at least [`SILENCE_FLOOR`] (`waited`).
    /// `None`: Redis answered and the object was busy, or a short wait's attempt was only slow.
    fn outage(&self, waited: Duration) -> Option<Option<String>> {
        let outage = lock(&self.outage).clone();
        if outage.is_some() || (!self.answered.load(Ordering::Relaxed) && waited >= SILENCE_FLOOR) {
            Some(outage)
        } else {
            None
        }
    }
}

/// How long a Redis that fails no call but answers none must have been silent before a wait
/// that ends then is called an outage: below it (a wait limit of a few milliseconds on a loaded
/// machine), an attempt whose answer is merely late ends the wait as busy, as it always did.
pub(crate) const SILENCE_FLOOR: Duration = Duration::from_millis(250);

/// How far a wait that ends as an outage got with Redis.
pub(crate) struct Reached {
    /// Some attempt was answered (Redis said the object was busy, then stopped answering).
    pub(crate) answered: bool,
    /// What the last call to Redis failed with.
    pub(crate) last: Option<String>,
}

/// The [`ErrorKind::Unavailable`] error of an acquire of `name` by `holder` (its wait limit
/// `wait`, counted from `start`) that reached its limit without Redis saying the object was
/// busy: no attempt was answered, or Redis stopped answering at the end. A settled error: what
/// an abandoned attempt won is given back in the background.
pub(crate) fn outage_error(
    cx: &Ctx,
    name: &str,
    holder: &str,
    wait: Option<Duration>,
    start: Instant,
    reached: Reached,
) -> Error {
    let waited = start.elapsed();
    let what = if reached.answered {
        "Redis stopped answering before"
    } else {
        "no attempt got an answer from Redis before"
    };
    let limit = match wait {
        Some(w) if w.is_zero() => format!(
            "the single try's bound (the response timeout, {:.3}s)",
            cx.response_timeout().as_secs_f64()
        ),
        Some(w) => format!("the wait limit ({:.3}s)", w.as_secs_f64()),
        None => "the wait ended".to_owned(),
    };
    let last = reached.last.map_or_else(
        || "check that the server is up and reachable, then retry".to_owned(),
        |m| format!("the last error: {m}"),
    );
    Error::new(
        ErrorKind::Unavailable,
        format!(
            "'{name}' was not acquired and is not known to be busy: {what} {limit} passed; \
             {last}"
        ),
    )
    .with_lock(name)
    .with_holder(holder)
    .with_waited(waited)
    .settled()
    .at_deadline()
}

/// Every argument of one acquire.
pub(crate) struct Acquire<P: Protocol> {
    pub(crate) cx: Arc<Ctx>,
    pub(crate) proto: Arc<P>,
    pub(crate) keeper: Arc<dyn Keeper<P::Won>>,
    pub(crate) request: Request,
    pub(crate) cancel: Option<CancellationToken>,
    /// When the caller asked (the wait limit counts from here).
    pub(crate) start: Instant,
}

/// How long a timed-out wait waits for its give-up clean-up before returning anyway.
const GIVE_UP_GRACE: Duration = Duration::from_millis(100);

/// Runs one acquire. See the module docs for deadlines, cancellation and outages.
pub(crate) async fn acquire<P: Protocol>(a: Acquire<P>) -> Result<Outcome<P::Won>> {
    let token = match &a.cancel {
        Some(parent) => parent.child_token(),
        None => CancellationToken::new(),
    };
    let deadline = a
        .request
        .wait
        .filter(|w| !w.is_zero())
        .and_then(|w| a.start.checked_add(w));
    // A single try has no wait limit but is bounded by the response timeout from its start.
    let single_by = a
        .request
        .single_try()
        .then(|| a.start + a.cx.response_timeout());
    let s = Shared {
        cx: a.cx,
        proto: a.proto,
        keeper: a.keeper,
        request: a.request,
        token,
        start: a.start,
        deadline,
        single_by,
        heard: Arc::default(),
    };
    // What this client's callers left of this object is cleaned up first (nearly always
    // nothing: one atomic load).
    if s.cx.settling.any()
        && !Box::pin(after_clean_ups(
            &s.cx,
            s.proto.name(),
            s.deadline.or(s.single_by),
            Some(&s.token),
        ))
        .await
    {
        // Clean-ups still running at the deadline: an outage when they wait for a Redis that is
        // down, else only slow (the object is busy with this client's own give-back).
        if s.cx.conn.is_down() {
            return s.timed_out(Outcome::TimedOut);
        }
        return Ok(Outcome::TimedOut);
    }
    if s.token.is_cancelled() || s.cx.stop.is_cancelled() {
        return Err(s.cancelled());
    }

    // Fast path: the first attempt runs inline; most acquires end here.
    let mut first = s.in_flight();
    let first_result = tokio::select! {
        biased;
        r = &mut first => r,
        _ = sleep_until(s.deadline) => {
            Box::pin(first.abandon(GIVE_UP_GRACE)).await;
            return s.timed_out(Outcome::TimedOut);
        }
        _ = sleep_until(s.single_by) => {
            Box::pin(first.abandon(GIVE_UP_GRACE)).await;
            return s.timed_out(Outcome::TimedOut);
        }
        _ = s.token.cancelled() => {
            Box::pin(first.abandon(s.cx.response_timeout())).await;
            return Err(s.cancelled());
        }
    };
    let sent = first.sent;
    drop(first);
    // Nothing to give up after this first attempt: a single try never joins a queue, and a
    // script that fails writes nothing.
    let start_with = match first_result {
        Ok(Attempt::Won(won)) => return s.finish(won, sent).await,
        Ok(Attempt::Busy { .. }) if s.request.single_try() => return Ok(Outcome::TimedOut),
        Ok(Attempt::Busy { .. }) => Start::Busy,
        // Nothing was sent: a single try says so, a wait rides the outage out.
        Err(e) if e.is_unsent() && s.request.single_try() => return Err(e),
        Err(e) if e.is_unanswered() || e.is_unsent() => Start::Unanswered(e, sent),
        Err(e) => return Err(e),
    };

    // The rest runs as its own task; dropping this future cancels it and gives back its win.
    let s = Arc::new(s);
    // In the acquire's span, if any: its attempts are the span's.
    let task = runtime::spawn(crate::telemetry::spans::inherited(run(
        s.clone(),
        start_with,
    )));
    let mut call = Call {
        task: Some(task),
        shared: s.clone(),
    };
    let joined = call.task.as_mut().expect("set above").await;
    // Claimed: from here on the result is the caller's, whatever happens to this future.
    call.task = None;
    match joined {
        Ok(Ok(Outcome::TimedOut)) => s.timed_out(Outcome::TimedOut),
        Ok(result) => result,
        Err(join) => Err(Error::new(
            ErrorKind::Redis,
            format!(
                "the wait for lock '{}' ended abnormally: {join}",
                s.proto.name()
            ),
        )
        .with_lock(s.proto.name())),
    }
}

/// How the loop starts after the inline attempt.
enum Start {
    Busy,
    /// The first attempt's reply was lost: settle it before anything else.
    Unanswered(Error, Instant),
}

struct Shared<P: Protocol> {
    cx: Arc<Ctx>,
    proto: Arc<P>,
    keeper: Arc<dyn Keeper<P::Won>>,
    request: Request,
    token: CancellationToken,
    start: Instant,
    deadline: Option<Instant>,
    /// A single try's bound: its start plus the response timeout.
    single_by: Option<Instant>,
    /// What Redis said during this wait.
    heard: Arc<Heard>,
}

impl<P: Protocol> Shared<P> {
    /// How a wait that reached its limit ends: `timed_out` (Redis answered, the object was
    /// busy), or [`ErrorKind::Unavailable`] when no attempt got an answer, or the last call to
    /// Redis failed for want of it.
    fn timed_out(&self, timed_out: Outcome<P::Won>) -> Result<Outcome<P::Won>> {
        let Some(last) = self.heard.outage(self.start.elapsed()) else {
            return Ok(timed_out);
        };
        Err(outage_error(
            &self.cx,
            self.proto.name(),
            &self.request.holder,
            self.request.wait,
            self.start,
            Reached {
                answered: self.heard.answered.load(Ordering::Relaxed),
                last,
            },
        ))
    }

    /// Keeps a win, unless the caller left (or the client closed) while it was in flight: then
    /// the one win just taken is given back.
    async fn finish(&self, won: P::Won, sent: Instant) -> Result<Outcome<P::Won>> {
        if !(self.token.is_cancelled() || self.cx.stop.is_cancelled())
            && self.keeper.keep(&won, sent)
        {
            return Ok(Outcome::Won(won));
        }
        // Boxed: rare, and kept out of the state of every acquire that keeps its win.
        Box::pin(self.refuse()).await
    }

    /// Gives back the one win just taken by a caller that left (or a client that closed).
    async fn refuse(&self) -> Result<Outcome<P::Won>> {
        let _ = self
            .proto
            .clone()
            .give_back(
                self.cx.clone(),
                self.request.holder.clone(),
                self.keeper.lease_after(),
            )
            .await;
        self.give_up(self.cx.response_timeout()).await;
        Err(self.cancelled())
    }

    /// Runs the protocol's give-up clean-up, waiting for it at most `grace` (it goes on in the
    /// background after that).
    async fn give_up(&self, grace: Duration) {
        let running = self.cx.settling.begin(self.proto.name());
        let clean = self
            .proto
            .clone()
            .give_up(self.cx.clone(), self.request.clone());
        let clean = runtime::spawn(async move {
            let _ = clean.await;
            drop(running);
        });
        let _ = tokio::time::timeout(grace, clean).await;
    }

    fn cancelled(&self) -> Error {
        let name = self.proto.name();
        if self.cx.stop.is_cancelled() {
            return Error::closed().with_lock(name);
        }
        let waited = self.start.elapsed();
        Error::new(
            ErrorKind::Cancelled,
            format!(
                "the wait for lock '{name}' was cancelled after {:.3}s; nothing was acquired",
                waited.as_secs_f64()
            ),
        )
        .with_lock(name)
        .with_holder(&*self.request.holder)
        .with_waited(waited)
    }

    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// The loop after the inline attempt; runs the give-up clean-up on every exit but a win (unless
/// an abandoned attempt already owns it).
async fn run<P: Protocol>(s: Arc<Shared<P>>, start_with: Start) -> Result<Outcome<P::Won>> {
    let mut abandoned = false;
    let result = run_loop(&s, start_with, &mut abandoned).await;
    if !abandoned && !matches!(result, Ok(Outcome::Won(_))) {
        let grace = if matches!(result, Ok(Outcome::TimedOut)) {
            GIVE_UP_GRACE
        } else {
            s.cx.response_timeout()
        };
        s.give_up(grace).await;
    }
    result
}

async fn run_loop<P: Protocol>(
    s: &Shared<P>,
    start_with: Start,
    abandoned: &mut bool,
) -> Result<Outcome<P::Won>> {
    let stop = s.cx.stop.clone();
    // The inline attempt's retry hint is not needed: the loop tries again right after
    // subscribing (a release may have come in between).
    if let Start::Unanswered(error, sent) = start_with {
        match settle_unanswered(s, error, sent, abandoned).await? {
            Gated::Won(won, sent) => return s.finish(won, sent).await,
            Gated::Busy(_) => {}
            Gated::TimedOut => return Ok(Outcome::TimedOut),
        }
    }
    if s.out_of_time() || s.request.single_try() {
        return Ok(Outcome::TimedOut);
    }

    let waiting = s.proto.waiting(&s.request.holder);
    let subscription = match &waiting {
        Waiting::PubSub { channel, wake, .. } => match subscribe(s, channel, *wake).await? {
            Some(sub) => Some(sub),
            None => return Ok(Outcome::TimedOut),
        },
        Waiting::Backoff(_) => None,
    };

    // The subscription connection's drops seen: after a new one, an attempt that cannot be
    // settled waits until Redis answers (see `reachable`).
    let mut drops = s.cx.pubsub.drops();
    // For telemetry: the subscription's wake marks as of this waiter's last wake-up, to tell a
    // reconnect's wake-up from a message's (see `Subscription::wake_marks`).
    let mut marks = match (&s.cx.telemetry, &subscription) {
        (Some(_), Some(sub)) => sub.wake_marks(),
        _ => (0, 0),
    };
    let mut failures = 1u32;
    // A back-off waiter pauses before its next attempt; a subscriber tries again at once (a
    // release may have come before the subscription).
    let mut pause_first = matches!(waiting, Waiting::Backoff(_));
    // An unlock message reaches every waiting process; each sends an attempt and all but one
    // lose (see `LostRaces`).
    let mut herd = LostRaces::new(matches!(
        waiting,
        Waiting::PubSub {
            wake: WakePolicy::Lock,
            ..
        }
    ));
    loop {
        if pause_first {
            pause_first = false;
        } else {
            let alone = subscription.as_ref().is_some_and(|sub| sub.alone());
            if let Some(pause) = herd.pause(alone, s.deadline) {
                tokio::select! {
                    biased;
                    _ = s.token.cancelled() => return Err(s.cancelled()),
                    _ = stop.cancelled() => return Err(s.cancelled()),
                    _ = tokio::time::sleep(pause) => {}
                }
            }
            let notified = subscription.as_ref().map(|sub| {
                let mut n = Box::pin(sub.notified());
                n.as_mut().enable();
                n
            });
            if s.token.is_cancelled() || stop.is_cancelled() {
                return Err(s.cancelled());
            }
            if s.out_of_time() {
                return Ok(Outcome::TimedOut);
            }
            if !s.proto.can_settle() && s.cx.pubsub.drops() != drops {
                drops = s.cx.pubsub.drops();
                if !reachable(s).await? {
                    return Ok(Outcome::TimedOut);
                }
            }
            let retry_in = match gated_attempt(s, abandoned).await? {
                Gated::Won(won, sent) => {
                    let outcome = s.finish(won, sent).await;
                    drop(notified);
                    if let (
                        Ok(Outcome::Won(_)),
                        Some(sub),
                        Waiting::PubSub {
                            linger: Some(grace),
                            ..
                        },
                    ) = (&outcome, subscription, &waiting)
                    {
                        sub.linger(*grace);
                    }
                    return outcome;
                }
                Gated::TimedOut => return Ok(Outcome::TimedOut),
                Gated::Busy(r) => r,
            };
            herd.busy();
            let now = Instant::now();
            let remaining = s.deadline.map(|d| d.saturating_duration_since(now));
            if remaining == Some(Duration::ZERO) {
                return Ok(Outcome::TimedOut);
            }
            if let Some(notified) = notified {
                // Wait for a message, the retry hint (the lock's expiry, a queue deadline) or our
                // own deadline, whichever is first.
                let wake_at = [retry_in, remaining]
                    .into_iter()
                    .flatten()
                    .min()
                    .map(|d| now + d);
                tokio::select! {
                    biased;
                    _ = s.token.cancelled() => return Err(s.cancelled()),
                    _ = stop.cancelled() => return Err(s.cancelled()),
                    _ = notified => herd.woken(true),
                    _ = sleep_until(wake_at) => herd.woken(false),
                }
                if let Some(telemetry) = &s.cx.telemetry {
                    let now = subscription.as_ref().map_or(marks, |sub| sub.wake_marks());
                    let (everyone, messages) = std::mem::replace(&mut marks, now);
                    let cause = match herd.after_message {
                        true if everyone != now.0 || messages == now.1 => WakeCause::Reconnect,
                        true => WakeCause::Message,
                        false => WakeCause::Timer,
                    };
                    telemetry.record(&Event::Woken { cause });
                }
                continue;
            }
        }
        // Back-off: sleep the next pause (never past the deadline).
        let Waiting::Backoff(backoff) = &waiting else {
            unreachable!("subscribers continue above")
        };
        let pause = backoff.pause(failures);
        failures = failures.saturating_add(1);
        let wake_at = [Some(Instant::now() + pause), s.deadline]
            .into_iter()
            .flatten()
            .min();
        tokio::select! {
            biased;
            _ = s.token.cancelled() => return Err(s.cancelled()),
            _ = stop.cancelled() => return Err(s.cancelled()),
            _ = sleep_until(wake_at) => {}
        }
        if let Some(telemetry) = &s.cx.telemetry {
            telemetry.record(&Event::Woken {
                cause: WakeCause::Backoff,
            });
        }
        if s.out_of_time() {
            return Ok(Outcome::TimedOut);
        }
    }
}

/// What a gated attempt came to.
enum Gated<W> {
    Won(W, Instant),
    Busy(Option<Duration>),
    TimedOut,
}

/// One attempt that survives a lost reply and never outlives the deadline.
async fn gated_attempt<P: Protocol>(s: &Shared<P>, abandoned: &mut bool) -> Result<Gated<P::Won>> {
    let mut attempt = s.in_flight();
    let result = tokio::select! {
        biased;
        r = &mut attempt => r,
        _ = sleep_until(s.deadline) => {
            attempt.abandon(GIVE_UP_GRACE).await;
            *abandoned = true;
            return Ok(Gated::TimedOut);
        }
        _ = s.token.cancelled() => {
            attempt.abandon(s.cx.response_timeout()).await;
            *abandoned = true;
            return Err(s.cancelled());
        }
    };
    match result {
        Ok(Attempt::Won(won)) => Ok(Gated::Won(won, attempt.sent)),
        Ok(Attempt::Busy { retry_in }) => Ok(Gated::Busy(retry_in)),
        Err(e) if e.is_unanswered() || e.is_unsent() => {
            settle_unanswered(s, e, attempt.sent, abandoned).await
        }
        Err(e) => Err(e),
    }
}

/// Sleeps `backoff` (between tries to reach a Redis out of reach), then doubles it, unless the
/// wait ends first: `Ok(false)` at its deadline, the cancelled error when it is cancelled or the
/// client closes.
async fn back_off<P: Protocol>(s: &Shared<P>, backoff: &mut RetryPause) -> Result<bool> {
    tokio::select! {
        biased;
        _ = s.token.cancelled() => return Err(s.cancelled()),
        _ = s.cx.stop.cancelled() => return Err(s.cancelled()),
        _ = sleep_until(s.deadline) => return Ok(false),
        _ = tokio::time::sleep(backoff.current()) => {}
    }
    backoff.grow();
    Ok(true)
}

/// Joins the wake-up channel; `None` when the deadline passed first. A SUBSCRIBE that fails for
/// want of an answer (the server dropped the subscription connection just then) is sent again,
/// with back-off, over the new connection, as an unanswered attempt is: an outage shorter than
/// the client's connect timeout does not end the wait.
async fn subscribe<P: Protocol>(
    s: &Shared<P>,
    channel: &str,
    wake: WakePolicy,
) -> Result<Option<crate::transport::pubsub::Subscription>> {
    let since = Instant::now();
    let mut backoff = RetryPause::new();
    loop {
        let failed = tokio::select! {
            biased;
            _ = s.token.cancelled() => return Err(s.cancelled()),
            _ = s.cx.stop.cancelled() => return Err(s.cancelled()),
            _ = sleep_until(s.deadline) => return Ok(None),
            sub = s.cx.pubsub.subscribe(channel, wake) => match sub {
                Ok(sub) => {
                    s.heard.note(&Ok(()), false);
                    return Ok(Some(sub));
                }
                Err(e) if e.is_unavailable() => {
                    s.heard.down(&e);
                    if since.elapsed() >= s.cx.outage_tolerance {
                        return Err(subscribe_failed(s, &e));
                    }
                    e
                }
                Err(e) => return Err(subscribe_failed(s, &e)),
            },
        };
        tracing::debug!(target: "crosslock", "waiting for '{}': subscribing failed ({failed}); trying again", s.proto.name());
        if !back_off(s, &mut backoff).await? {
            return Ok(None);
        }
    }
}

/// Waits until Redis answers a `PING` on the command connection, with back-off, for up to the
/// outage tolerance (then fails with the last error) and never past the deadline (`false`).
/// Before an attempt that cannot be settled, after the connections dropped: a `PING` is safe to
/// send again, the attempt is not.
async fn reachable<P: Protocol>(s: &Shared<P>) -> Result<bool> {
    let since = Instant::now();
    let mut backoff = RetryPause::new();
    loop {
        let pinged = tokio::select! {
            biased;
            _ = s.token.cancelled() => return Err(s.cancelled()),
            _ = s.cx.stop.cancelled() => return Err(s.cancelled()),
            _ = sleep_until(s.deadline) => return Ok(false),
            r = s.cx.conn.ping() => r,
        };
        s.heard.note(&pinged, false);
        match pinged {
            Ok(()) => return Ok(true),
            Err(e) if e.is_unavailable() && since.elapsed() < s.cx.outage_tolerance => {}
            Err(e) => return Err(e.with_lock(s.proto.name())),
        }
        if !back_off(s, &mut backoff).await? {
            return Ok(false);
        }
    }
}

/// The error of a wait whose SUBSCRIBE failed with `e`.
fn subscribe_failed<P: Protocol>(s: &Shared<P>, e: &Error) -> Error {
    let name = s.proto.name();
    Error::new(
        e.kind(),
        format!("the wait for '{name}' could not subscribe to its wake-ups: {e}"),
    )
    .with_lock(name)
}
