//! The one acquire loop every waiting lock type runs.
//!
//! try → subscribe → loop { arm the wake-up, try again, wait for min(ttl, remaining) or a
//! message }. Lock types describe only what differs ([`Acquirable`]): their acquire script,
//! channel, wake policy and how to undo an acquisition nobody wants any more.
//!
//! The loop runs as its own task. Dropping the caller's future, or cancelling its token, makes
//! the task stop at the next wait; an attempt already sent to Redis is allowed to finish, and if
//! it acquired the lock, the lock is released again before the task ends. So a cancelled or
//! timed-out wait leaves nothing behind: no lock, no subscription.
//!
//! Once waiting, a Redis outage shorter than the client's connect timeout is waited out (the
//! attempt is retried with back-off, and every waiter is woken when the subscription connection
//! comes back); a longer one ends the wait with [`ErrorKind::Unavailable`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Gives back an acquisition the caller no longer wants.
    fn undo(&self, state: &State, holder: &str) -> impl Future<Output = Result<()>> + Send;
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
    let task = runtime::spawn(run(state, kind, owner, wait, lease, token.clone()));
    // Dropping this future (the caller gave up) cancels the loop; the task still cleans up.
    let _cancel_on_drop = token.drop_guard();
    match task.await {
        Ok(result) => result,
        Err(join) => Err(Error::new(
            ErrorKind::Redis,
            format!("the wait for lock '{name}' ended abnormally: {join}"),
        )
        .with_lock(&name)),
    }
}

async fn run<K: Acquirable>(
    state: Arc<State>,
    kind: Arc<K>,
    owner: Owner,
    wait: Option<Duration>,
    lease: Option<Duration>,
    token: CancellationToken,
) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = wait.map(|w| start + w);
    let holder = owner.holder(&state.id);
    let lease_ms = lease.unwrap_or(state.watchdog_timeout);
    let stop = state.stop.clone();

    let cancelled = || cancelled_error(&*kind, &stop, &holder, start);
    let acquired = || finish(&state, &*kind, owner, &holder, lease, &token, start);

    if token.is_cancelled() || stop.is_cancelled() {
        return Err(cancelled());
    }
    if kind.attempt(&state, &holder, lease_ms).await?.is_none() {
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

    let mut outage: Option<(Instant, Duration)> = None;
    loop {
        let notified = subscription.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if token.is_cancelled() || stop.is_cancelled() {
            return Err(cancelled());
        }
        let ttl = match kind.attempt(&state, &holder, lease_ms).await {
            Ok(None) => return acquired().await,
            Ok(Some(ttl)) => {
                outage = None;
                ttl
            }
            // Redis went away while we wait (a restart, a failover, a cut connection): keep
            // waiting through an outage shorter than the connect timeout, retrying with back-off;
            // report a longer one.
            Err(e) if e.is_unavailable() => {
                let (since, backoff) = outage.get_or_insert((Instant::now(), Duration::ZERO));
                if since.elapsed() >= state.outage_tolerance {
                    return Err(e);
                }
                *backoff = (*backoff * 2).clamp(Duration::from_millis(20), Duration::from_millis(500));
                backoff.as_millis() as i64
            }
            Err(e) => return Err(e),
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

/// Records the hold, unless the caller left while the winning attempt was in flight: then the
/// lock is given back.
async fn finish<K: Acquirable>(
    state: &State,
    kind: &K,
    owner: Owner,
    holder: &str,
    lease: Option<Duration>,
    token: &CancellationToken,
    start: Instant,
) -> Result<Outcome> {
    if token.is_cancelled() || state.stop.is_cancelled() {
        let _ = kind.undo(state, holder).await;
        return Err(cancelled_error(kind, &state.stop, holder, start));
    }
    let key = HoldKey { name: kind.name().clone(), owner };
    state.holds.acquired(key, holder, lease);
    Ok(Outcome::Acquired)
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
