//! The one acquire loop every waiting lock type runs.
//!
//! try → subscribe → loop { arm the wake-up, try again, wait for min(ttl, remaining) or a
//! message }. Lock types describe only what differs ([`Acquirable`]): their acquire script,
//! channel, wake policy and how to undo an acquisition nobody wants any more.
//!
//! The first attempt runs inline (most acquires end there); the rest of the loop runs as its own
//! task. Dropping the caller's future, or cancelling its token, makes the task stop at the next
//! wait; an attempt already sent to Redis is allowed to finish, and if it acquired the lock, the
//! lock is released again before the task ends. An inline attempt whose caller left leaves a
//! guard that asks Redis once the attempt has run and gives back what it won. So a cancelled
//! or timed-out wait leaves nothing behind: no lock, no subscription.
//!
//! If the caller leaves after the task has already won (a `select!` took another branch, an
//! asyncio task was cancelled at that very moment), the hold it won is given back as well.
//! Giving back always returns exactly the one hold this acquire took: a cancelled re-entrant
//! acquire leaves the caller's outer hold in place.
//!
//! An attempt whose reply is lost (the connection dropped, the server restarted) is ambiguous:
//! it may have acquired. Before trying again the loop asks Redis how many holds the caller has,
//! so the lock is never counted twice. Such outages are waited out, with back-off, for up to the
//! client's connect timeout (at least one retry, even for a single-attempt acquire); a longer
//! one ends the wait with [`ErrorKind::Unavailable`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::client::State;
use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::pubsub::Wake;
use crate::runtime;
use crate::watchdog::HoldKey;

/// What a lock type contributes to the acquire loop.
pub(crate) trait Acquirable: Send + Sync + 'static {
    /// The lock's name (its main key).
    fn name(&self) -> &Arc<str>;
    /// The channel its releases are published on.
    fn channel(&self) -> &str;
    /// How a message on that channel wakes local waiters.
    fn wake(&self) -> Wake;
    /// One attempt: `None` when acquired, else the lock's remaining TTL in ms (negative: none).
    fn attempt(
        &self,
        state: &State,
        holder: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
    /// How many holds `holder` has in Redis right now (to settle an unanswered attempt).
    fn held_count(&self, state: &State, holder: &str) -> impl Future<Output = Result<u64>> + Send;
    /// Gives back one hold of `holder`, keeping the lock alive for `lease` if holds remain.
    fn give_back(
        &self,
        state: &State,
        holder: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// How an acquire ended, short of an error.
pub(crate) enum Outcome {
    Acquired,
    TimedOut,
}

/// Runs the acquire loop for `owner` on the runtime. See the module docs for cancellation.
pub(crate) async fn acquire<K: Acquirable>(
    state: Arc<State>,
    kind: Arc<K>,
    owner: Owner,
    wait: Option<Duration>,
    lease: Option<Duration>,
    cancel: Option<CancellationToken>,
) -> Result<Outcome> {
    let token = match cancel {
        Some(parent) => parent.child_token(),
        None => CancellationToken::new(),
    };
    let name = kind.name().clone();
    let start = Instant::now();

    // Fast path: the first attempt runs inline; most acquires end here. A caller that leaves
    // while it is in flight leaves a guard behind that settles it with Redis.
    let mut skip_first = false;
    if !token.is_cancelled() && !state.stop.is_cancelled() {
        let key = HoldKey { name: name.clone(), owner };
        let holder = owner.holder(&state.id);
        let lease_ms = lease.unwrap_or(state.watchdog_timeout);
        let mut unanswered = Unanswered { state: state.clone(), kind: kind.clone(), key: key.clone(), armed: true };
        let first = kind.attempt(&state, &holder, lease_ms).await;
        unanswered.armed = false;
        match first {
            Ok(None) => return finish(&state, &*kind, &key, &holder, lease, &token, start).await,
            Ok(Some(_)) if wait == Some(Duration::ZERO) => return Ok(Outcome::TimedOut),
            Ok(Some(_)) => skip_first = true,
            Err(e) if e.is_unavailable() => {} // the loop's retries settle it
            Err(e) => return Err(e),
        }
    }

    let task = runtime::spawn(run(state.clone(), kind.clone(), owner, wait, lease, token.clone(), start, skip_first));
    let mut call = Call { task: Some(task), token, state, kind, owner };
    let joined = call.task.as_mut().expect("set above").await;
    // Claimed: from here on the result is the caller's, whatever happens to this future.
    call.task = None;
    match joined {
        Ok(result) => result,
        Err(join) => Err(Error::new(
            ErrorKind::Redis,
            format!("the wait for lock '{name}' ended abnormally: {join}"),
        )
        .with_lock(&name)),
    }
}

/// An inline first attempt whose caller left before its reply: once Redis has run it, give back
/// the hold it may have won (Redis counting more holds than this process recorded).
struct Unanswered<K: Acquirable> {
    state: Arc<State>,
    kind: Arc<K>,
    key: HoldKey,
    armed: bool,
}

impl<K: Acquirable> Drop for Unanswered<K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (state, kind, key) = (self.state.clone(), self.kind.clone(), self.key.clone());
        runtime::spawn(async move {
            let holder = key.owner.holder(&state.id);
            // Sent after the attempt on the same connection, so it sees the attempt's effect.
            let in_redis = kind.held_count(&state, &holder).await.unwrap_or(0);
            if in_redis > state.holds.count(&key) as u64 {
                let _ = kind.give_back(&state, &holder, state.holds.current_lease(&key)).await;
            }
        });
    }
}

/// The caller's side of an acquire task. Dropped before the result was claimed, it cancels the
/// task and gives back whatever the task won.
struct Call<K: Acquirable> {
    task: Option<JoinHandle<Result<Outcome>>>,
    token: CancellationToken,
    state: Arc<State>,
    kind: Arc<K>,
    owner: Owner,
}

impl<K: Acquirable> Drop for Call<K> {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else { return };
        self.token.cancel();
        let (state, kind, owner) = (self.state.clone(), self.kind.clone(), self.owner);
        runtime::spawn(async move {
            if let Ok(Ok(Outcome::Acquired)) = task.await {
                let key = HoldKey { name: kind.name().clone(), owner };
                let holder = owner.holder(&state.id);
                let lease = state.holds.lease_after_release(&key);
                state.holds.begin_release(&key);
                let _ = kind.give_back(&state, &holder, lease).await;
                state.holds.end_release(&key);
                state.holds.released(&key, false);
            }
        });
    }
}

#[allow(clippy::too_many_arguments)]
async fn run<K: Acquirable>(
    state: Arc<State>,
    kind: Arc<K>,
    owner: Owner,
    wait: Option<Duration>,
    lease: Option<Duration>,
    token: CancellationToken,
    start: Instant,
    skip_first: bool,
) -> Result<Outcome> {
    let deadline = wait.map(|w| start + w);
    let holder = owner.holder(&state.id);
    let lease_ms = lease.unwrap_or(state.watchdog_timeout);
    let stop = state.stop.clone();
    let key = HoldKey { name: kind.name().clone(), owner };

    let cancelled = || cancelled_error(&*kind, &stop, &holder, start);
    let acquired = || finish(&state, &*kind, &key, &holder, lease, &token, start);
    let attempt = || {
        let gate = Gate { state: &state, kind: &*kind, key: &key, holder: &holder, token: &token, start, deadline };
        gate.attempt(lease_ms)
    };

    if token.is_cancelled() || stop.is_cancelled() {
        return Err(cancelled());
    }
    if !skip_first && attempt().await?.is_none() {
        return acquired().await;
    }
    let timed_out = || Outcome::TimedOut;
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(timed_out());
    }

    let subscription = tokio::select! {
        biased;
        _ = token.cancelled() => return Err(cancelled()),
        _ = stop.cancelled() => return Err(cancelled()),
        _ = sleep_until(deadline) => return Ok(timed_out()),
        sub = state.pubsub.subscribe(kind.channel(), kind.wake()) => sub?,
    };

    loop {
        let notified = subscription.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if token.is_cancelled() || stop.is_cancelled() {
            return Err(cancelled());
        }
        let ttl = match attempt().await? {
            None => return acquired().await,
            Some(ttl) => ttl,
        };
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) {
            return Ok(timed_out());
        }
        // Wait for a release message, the lock's expiry, or our own deadline, whichever is first.
        let wake_at = match (u64::try_from(ttl).ok(), remaining) {
            (Some(ttl), Some(r)) => Some(now + r.min(Duration::from_millis(ttl))),
            (Some(ttl), None) => Some(now + Duration::from_millis(ttl)),
            (None, Some(r)) => Some(now + r),
            (None, None) => None, // no TTL on the lock and no deadline: only a message helps
        };
        tokio::select! {
            biased;
            _ = token.cancelled() => return Err(cancelled()),
            _ = stop.cancelled() => return Err(cancelled()),
            _ = &mut notified => {}
            _ = sleep_until(wake_at) => {}
        }
    }
}

/// One attempt that survives a lost reply: see the module docs.
struct Gate<'a, K: Acquirable> {
    state: &'a State,
    kind: &'a K,
    key: &'a HoldKey,
    holder: &'a str,
    token: &'a CancellationToken,
    start: Instant,
    deadline: Option<Instant>,
}

impl<K: Acquirable> Gate<'_, K> {
    async fn attempt(self, lease_ms: Duration) -> Result<Option<i64>> {
        let mut outage: Option<(Instant, Duration)> = None;
        loop {
            let error = match self.kind.attempt(self.state, self.holder, lease_ms).await {
                Ok(result) => return Ok(result),
                Err(e) if e.is_unavailable() => e,
                Err(e) => return Err(e),
            };
            // The attempt may have run without its reply reaching us.
            let (since, backoff) = outage.get_or_insert((Instant::now(), Duration::ZERO));
            let first_retry = backoff.is_zero();
            let out_of_time = since.elapsed() >= self.state.outage_tolerance
                || self.deadline.is_some_and(|d| Instant::now() >= d);
            if !first_retry && out_of_time {
                return Err(error);
            }
            *backoff = if first_retry { Duration::from_millis(10) } else { (*backoff * 2).min(Duration::from_millis(500)) };
            let pause = *backoff;
            tokio::select! {
                biased;
                _ = self.token.cancelled() => return Err(cancelled_error(self.kind, &self.state.stop, self.holder, self.start)),
                _ = self.state.stop.cancelled() => return Err(Error::closed().with_lock(self.kind.name())),
                _ = tokio::time::sleep(pause) => {}
            }
            // Settle the unanswered attempt: did Redis count a hold we have not recorded?
            match self.kind.held_count(self.state, self.holder).await {
                Ok(in_redis) if in_redis > self.state.holds.count(self.key) as u64 => return Ok(None),
                Ok(_) => {}
                Err(e) if e.is_unavailable() => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Records the hold, unless the caller left while the winning attempt was in flight (or the
/// client closed): then the one hold just won is given back.
async fn finish<K: Acquirable>(
    state: &State,
    kind: &K,
    key: &HoldKey,
    holder: &str,
    lease: Option<Duration>,
    token: &CancellationToken,
    start: Instant,
) -> Result<Outcome> {
    let recorded = !(token.is_cancelled() || state.stop.is_cancelled())
        && state.holds.acquired(key.clone(), holder, lease).is_some();
    if recorded {
        return Ok(Outcome::Acquired);
    }
    let _ = kind.give_back(state, holder, state.holds.current_lease(key)).await;
    Err(cancelled_error(kind, &state.stop, holder, start))
}

fn cancelled_error<K: Acquirable>(kind: &K, stop: &CancellationToken, holder: &str, start: Instant) -> Error {
    if stop.is_cancelled() {
        return Error::closed().with_lock(kind.name());
    }
    Error::new(
        ErrorKind::Cancelled,
        format!(
            "the wait for lock '{}' was cancelled after {:.3}s; nothing was acquired",
            kind.name(),
            start.elapsed().as_secs_f64()
        ),
    )
    .with_lock(kind.name())
    .with_holder(holder)
    .with_waited(start.elapsed())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
