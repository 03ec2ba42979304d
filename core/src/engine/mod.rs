//! The type-agnostic engine every object type stands on.
//!
//! Redisson splits its locks into a generic machine (`RedissonBaseLock`: identity, release,
//! renewal; `RedissonLock`: waiting) and per-type hooks (the acquire and release scripts, the
//! channel, the holder suffix, the give-up clean-up, the renewal kind). So does crosslock:
//!
//! - [`Protocol`]: what one object type contributes to *acquiring*: one attempt (its script),
//!   how to wait between attempts (a channel and its [`WakePolicy`], or a back-off), how to settle
//!   an attempt whose reply was lost, how to give back a win nobody wants, and the clean-up when
//!   a wait gives up (the fair lock's queue). Owner-less objects (semaphores, latches) use it too.
//! - [`wait`]: the one acquire loop over any `Protocol`; deadlines, cancellation, outages.
//! - [`Family`](family::Family): what a lock of the RLock family adds for *holding*: its holder
//!   suffix, renewal kind, its one release script (one hold, or all of a holder's for `close()`:
//!   [`Release`](family::Release)), force-unlock and queries.
//!   [`LockCore`](family::LockCore) is the generic lock built from it (Redisson's
//!   `RedissonBaseLock`); each public lock type is a thin newtype over one. A win returns a
//!   [`LockGuard`](guard::LockGuard) ([`guard`]); [`any_lock`] erases the type
//!   ([`AnyLock`](any_lock::AnyLock)) for the bindings and composite locks.
//! - [`unowned`]: waiting for what nobody holds (semaphore permits, a latch reaching zero): wins
//!   are not recorded as holds, and a local FIFO gate keeps one process's waiters in order.
//! - [`holds`]: what this client holds, keyed by lock name and holder (`…:write` beside `…`).
//! - [`renewal`]: the one renewal loop per client: batched per renewal kind, retried within the
//!   period, and the lost-lock signal, both when a renewal finds a lock gone and when no renewal
//!   was confirmed before the last confirmed lease ran out; [`lost`] holds what that signal tells
//!   the application ([`LostLock`](lost::LostLock)).
//!
//! **A change in this folder runs the whole family's conformance suites** (CONTRIBUTING.md).

pub(crate) mod any_lock;
pub(crate) mod family;
pub(crate) mod guard;
pub(crate) mod holds;
pub(crate) mod lost;
pub(crate) mod renewal;
pub(crate) mod settling;
pub(crate) mod unowned;
pub(crate) mod wait;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::session::Ctx;
use crate::transport::ReplicaAcks;
pub(crate) use crate::transport::pubsub::WakePolicy;

/// The longest lease or wait crosslock accepts: 2^53 − 1 ms (about 285,000 years), the largest
/// integer a JavaScript number or a Lua number holds exactly. Longer values are refused before
/// anything is sent, so Redis never sees a TTL it would reject or wrap.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// assert_eq!(crosslock::MAX_DURATION, Duration::from_millis(9_007_199_254_740_991));
/// ```
pub const MAX_DURATION: Duration = Duration::from_millis(crate::limits::DURATION_MS.max as u64);

/// What one attempt got.
#[derive(Debug)]
pub(crate) enum Attempt<W> {
    /// Acquired: the payload is what the caller gets (a fencing token, or nothing).
    Won(W),
    /// Someone else has it. Try again within `retry_in` at the latest (the lock's remaining
    /// lease, or a queue deadline); `None`: only a message (or the caller's deadline) helps.
    Busy { retry_in: Option<Duration> },
}

/// How a waiter waits between attempts.
#[derive(Debug, Clone)]
pub(crate) enum Waiting {
    /// Subscribe to `channel` (shared per client) and wake as `wake` says. After a won wait,
    /// keep the subscription for `linger` if the channel is likely to be waited on again soon
    /// (see [`Subscription::linger`](crate::transport::pubsub::Subscription::linger)).
    PubSub {
        channel: String,
        wake: WakePolicy,
        linger: Option<Duration>,
    },
    /// No subscription: sleep between attempts (the spin lock).
    Backoff(Backoff),
}

impl Waiting {
    /// Subscribe to `channel`, waking as `wake` says, and keep no subscription after a won wait.
    pub(crate) fn on(channel: &str, wake: WakePolicy) -> Self {
        Waiting::PubSub {
            channel: channel.to_owned(),
            wake,
            linger: None,
        }
    }
}

/// Pauses between the attempts of a waiter that does not subscribe.
///
/// Redisson's spin lock default is exponential: 1 ms, doubling (plus a little jitter) up to
/// 128 ms.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::time::Duration;
/// let backoff = crosslock::Backoff::exponential(Duration::from_millis(1), Duration::from_millis(128));
/// let lock = client.spin_lock_with("jobs", backoff)?;
/// let _guard = lock.acquire().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backoff {
    /// `initial`, then twice the previous pause plus up to one millisecond per failed attempt
    /// of jitter, capped at `max`.
    Exponential {
        /// The first pause.
        initial: Duration,
        /// The longest pause.
        max: Duration,
    },
    /// The same pause every time.
    Constant(Duration),
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
        }
    }
}

impl Backoff {
    /// Redisson's `ExponentialBackOff` with its defaults (1 ms doubling to 128 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use crosslock::Backoff;
    /// let b = Backoff::exponential(Duration::from_millis(1), Duration::from_millis(128));
    /// assert_eq!(b, Backoff::default());
    /// ```
    pub fn exponential(initial: Duration, max: Duration) -> Self {
        Backoff::Exponential { initial, max }
    }

    /// Redisson's `ConstantBackOff` (its default is 64 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = crosslock::Backoff::constant(Duration::from_millis(64));
    /// assert_eq!(b.to_string(), "a constant 64 ms");
    /// ```
    pub fn constant(pause: Duration) -> Self {
        Backoff::Constant(pause)
    }

    /// Refuses a pause of zero, an initial pause above the longest, or a pause above an hour,
    /// naming the lock (`lock`) it was meant for.
    pub(crate) fn validate(&self, lock: &str) -> Result<()> {
        let (a, b) = match *self {
            Backoff::Exponential { initial, max } => (initial, max),
            Backoff::Constant(d) => (d, d),
        };
        let problem = if a.is_zero() {
            "a pause must be longer than zero"
        } else if b < a {
            "the initial pause must not be longer than the max"
        } else if b > Duration::from_secs(3600) {
            "a pause must be at most 1 h"
        } else {
            return Ok(());
        };
        Err(Error::invalid(format!(
            "the back-off of spin lock '{lock}' is {self}: {problem} (a back-off needs 0 < initial ≤ max ≤ 1 h)"
        ))
        .with_lock(lock))
    }

    /// The pause after `failures` failed attempts (1 = after the first).
    pub(crate) fn pause(&self, failures: u32) -> Duration {
        match *self {
            Backoff::Constant(d) => d,
            Backoff::Exponential { initial, max } => {
                let doubled = initial.saturating_mul(1u32 << failures.saturating_sub(1).min(20));
                let jitter =
                    Duration::from_micros(fastrand_below(u64::from(failures.min(1000)) * 1000 + 1));
                doubled.saturating_add(jitter).min(max)
            }
        }
    }
}

impl fmt::Display for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Backoff::Exponential { initial, max } => {
                write!(f, "exponential from {} to {}", human(initial), human(max))
            }
            Backoff::Constant(d) => write!(f, "a constant {}", human(d)),
        }
    }
}

/// A duration as people write it: `0 ms`, `1.5 ms`, `64 ms`, `2 s`.
fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        let ms = d.as_secs_f64() * 1000.0;
        format!("{} ms", (ms * 1000.0).round() / 1000.0)
    } else {
        format!("{} s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
    }
}

/// A cheap pseudo-random number below `n` (jitter only; no quality needed).
pub(crate) fn fastrand_below(n: u64) -> u64 {
    use std::cell::Cell;
    thread_local! { static STATE: Cell<u64> = Cell::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id())); }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x % n.max(1)
    })
}

/// One acquire request, as the attempts of the loop see it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The caller's holder string.
    pub(crate) holder: Arc<str>,
    /// The lease the script applies (the watchdog's when the caller gave none).
    pub(crate) lease: Duration,
    /// The caller's wait limit (`None`: none; `Some(ZERO)`: a single try).
    pub(crate) wait: Option<Duration>,
    /// Where this attempt's acquisition notes its replica acks: an attempt runs its
    /// [`Synced`](crate::scripts::Synced) script with
    /// `cx.conn.eval_synced(&request.acks, ..)`. Under `ClientOptions::wait_for_replicas` the loop
    /// gives each attempt one of its own and reads it afterwards; otherwise it notes nothing.
    pub(crate) acks: ReplicaAcks,
}

impl Request {
    /// The request of a caller: `holder`, for `lease`, waiting at most `wait`.
    pub(crate) fn new(holder: Arc<str>, lease: Duration, wait: Option<Duration>) -> Self {
        Request {
            holder,
            lease,
            wait,
            acks: ReplicaAcks::default(),
        }
    }

    pub(crate) fn single_try(&self) -> bool {
        self.wait == Some(Duration::ZERO)
    }
}

/// What an object type contributes to the acquire loop (see the module docs).
pub(crate) trait Protocol: Send + Sync + 'static {
    /// What a won attempt yields.
    type Won: Send + 'static;

    /// The object's name (its main key).
    fn name(&self) -> &Arc<str>;

    /// How a waiter with holder string `holder` waits between attempts.
    fn waiting(&self, holder: &str) -> Waiting;

    /// One attempt. The future owns what it needs, so an attempt still in flight when its caller
    /// leaves can finish in the background. It runs its acquire script (a
    /// [`Synced`](crate::scripts::Synced) one) with `cx.conn.eval_synced(&request.acks, ..)`, so
    /// that under `ClientOptions::wait_for_replicas` the loop sees how many replicas have the win.
    fn attempt(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        request: Request,
    ) -> impl Future<Output = Result<Attempt<Self::Won>>> + Send + 'static;

    /// Whether [`settle`](Self::settle) can tell an unanswered attempt's outcome. Owner-less
    /// objects (a semaphore's permits) cannot: an attempt whose reply is lost then fails the wait
    /// with the unavailable kind, saying the outcome is unknown, rather than risk taking twice.
    fn can_settle(&self) -> bool {
        true
    }

    /// After an attempt whose reply was lost: has Redis recorded a win for `holder` that this
    /// process has not (`recorded` is what it has)? If so, its payload.
    fn settle(
        &self,
        cx: &Ctx,
        holder: &str,
        recorded: usize,
    ) -> impl Future<Output = Result<Option<Self::Won>>> + Send;

    /// Gives back one win that nobody will use, keeping what remains alive for `lease_after`.
    fn give_back(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        holder: Arc<str>,
        lease_after: Duration,
    ) -> impl Future<Output = Result<()>> + Send + 'static;

    /// Clean-up when a wait gives up (timed out, cancelled, failed): the fair lock leaves its
    /// queue. Runs after any attempt of the wait has finished.
    fn give_up(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        request: Request,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let _ = (cx, request);
        async { Ok(()) }
    }
}

/// The margin by which the lost-lock signal precedes the end of the last confirmed lease, for
/// the clocks of this host and of Redis running at slightly different rates: Redlock's
/// `lease × 0.01 + 2 ms`.
pub(crate) fn clock_drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// Milliseconds since the Unix epoch on this host (for the fair lock's deadlines, which Redisson
/// computes from the client's wall clock).
pub(crate) fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
