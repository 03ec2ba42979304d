//! Telemetry: what a client measures of its waits and holds, told as [`Event`]s to the
//! [`Recorder`] given in [`ClientOptions::telemetry`](crate::ClientOptions::telemetry). Core
//! measures once, at the places every object's acquire and every hold pass through; a recorder
//! turns the events into whatever its host exports. With the cargo feature `opentelemetry`,
//! `telemetry::OpenTelemetry` records them as OpenTelemetry metrics.
//!
//! Without a recorder nothing is measured: each place costs a branch on an `Option`.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::kinds::LockKind;

mod instruments;
#[cfg(feature = "opentelemetry")]
mod otel;
pub(crate) mod spans;
pub use instruments::{Instrument, InstrumentKind, Measurement, attribute};
#[cfg(feature = "opentelemetry")]
pub use otel::OpenTelemetry;
pub use spans::{
    SpanData, SpanExporter, SpanKind, SpanLevel, SpanParent, SpanValue, with_span_parent,
};

/// Why a hold was found lost.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::LostReason;
/// client.on_lock_lost(|lost| match lost.reason {
///     LostReason::Gone => eprintln!("{} was deleted or expired in Redis", lost.name),
///     _ => eprintln!("{} may be held by someone else: {}", lost.name, lost.reason),
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found the lock gone in Redis (it expired, was force-unlocked or deleted).
    Gone,
    /// No renewal was confirmed before the last confirmed lease ran out (Redis unreachable, a
    /// partition, a paused process), or a hold taken with an explicit lease outlived it: the lock
    /// may now be held by someone else.
    Expired,
}

impl LostReason {
    /// The reason as a metric attribute says it: `"gone"` or `"expired"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::LostReason::Gone.as_str(), "gone");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            LostReason::Gone => "gone",
            LostReason::Expired => "expired",
        }
    }

    /// `"lost:"` and [`as_str`](Self::as_str): how a host binding labels a hold that ended lost.
    #[doc(hidden)]
    pub const fn lost_label(self) -> &'static str {
        match self {
            LostReason::Gone => "lost:gone",
            LostReason::Expired => "lost:expired",
        }
    }
}

impl std::fmt::Display for LostReason {
    /// Why, in words: `a renewal found it gone (…)` or `its lease ran out before a renewal was
    /// confirmed (…)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Gone => {
                "a renewal found it gone (it expired, was force-unlocked or deleted)"
            }
            LostReason::Expired => {
                "its lease ran out before a renewal was confirmed (Redis unreachable, a partition, \
                 a paused process, or an explicit lease outlived)"
            }
        })
    }
}

/// Which kind of object an event is about: the value of the `crosslock.object.type` attribute.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::ObjectType;
/// assert_eq!(ObjectType::from(crosslock::LockKind::FairLock).as_str(), "fair_lock");
/// assert_eq!(ObjectType::Semaphore.as_str(), "semaphore");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectType {
    /// A lock of the lock family (a permit of a permit-expirable semaphore is
    /// [`PermitExpirableSemaphore`](Self::PermitExpirableSemaphore)).
    Lock(LockKind),
    /// A [`Semaphore`](crate::Semaphore).
    Semaphore,
    /// A [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
    PermitExpirableSemaphore,
    /// A [`CountDownLatch`](crate::CountDownLatch) (its wait is `await_zero`).
    CountDownLatch,
    /// A [`MultiLock`](crate::MultiLock): its wait (its parts' tries and holds are measured as
    /// their own types too).
    MultiLock,
    /// A [`RedLock`](crate::RedLock): its wait (its parts' as their own types too).
    RedLock,
}

impl ObjectType {
    /// The type's name: the lock kind's name ([`LockKind::as_str`]), `"semaphore"`,
    /// `"permit_expirable_semaphore"`, `"count_down_latch"`, `"multi_lock"` or `"red_lock"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::ObjectType;
    /// assert_eq!(ObjectType::CountDownLatch.as_str(), "count_down_latch");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::Lock(LockKind::Permit) | ObjectType::PermitExpirableSemaphore => {
                "permit_expirable_semaphore"
            }
            ObjectType::Lock(kind) => kind.as_str(),
            ObjectType::Semaphore => "semaphore",
            ObjectType::CountDownLatch => "count_down_latch",
            ObjectType::MultiLock => "multi_lock",
            ObjectType::RedLock => "red_lock",
        }
    }
}

impl From<LockKind> for ObjectType {
    /// A hold's kind as an object type: a permit is its semaphore's.
    fn from(kind: LockKind) -> Self {
        match kind {
            LockKind::Permit => ObjectType::PermitExpirableSemaphore,
            kind => ObjectType::Lock(kind),
        }
    }
}

/// How a wait ended: the value of the `crosslock.outcome` attribute.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::telemetry::WaitOutcome::Timeout.as_str(), "timeout");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitOutcome {
    /// Acquired (taken, opened).
    Acquired,
    /// The wait limit passed (a single try found it busy).
    Timeout,
    /// Cancelled by the caller: a cancel token, or the caller's future dropped.
    Cancelled,
    /// Redis could not be reached for it ([`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)).
    Unavailable,
    /// Any other error.
    Error,
}

impl WaitOutcome {
    /// `"acquired"`, `"timeout"`, `"cancelled"`, `"unavailable"` or `"error"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::WaitOutcome::Acquired.as_str(), "acquired");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            WaitOutcome::Acquired => "acquired",
            WaitOutcome::Timeout => "timeout",
            WaitOutcome::Cancelled => "cancelled",
            WaitOutcome::Unavailable => "unavailable",
            WaitOutcome::Error => "error",
        }
    }

    /// The outcome of a wait that returned `result` (`Ok(false)`: the wait limit passed).
    pub(crate) fn of<T>(result: &Result<Option<T>>) -> Self {
        use crate::error::ErrorKind;
        match result {
            Ok(Some(_)) => WaitOutcome::Acquired,
            Ok(None) => WaitOutcome::Timeout,
            Err(e) => match e.kind() {
                ErrorKind::Timeout => WaitOutcome::Timeout,
                ErrorKind::Cancelled => WaitOutcome::Cancelled,
                ErrorKind::Unavailable => WaitOutcome::Unavailable,
                _ => WaitOutcome::Error,
            },
        }
    }
}

/// How a hold ended.
///
/// # Examples
///
/// ```
/// use crosslock::{LostReason, telemetry::HoldEnd};
/// assert_ne!(HoldEnd::Released, HoldEnd::Lost(LostReason::Gone));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldEnd {
    /// Released by its owner, or on the client's close.
    Released,
    /// Found lost (the lost-lock signal fired for it).
    Lost(LostReason),
}

/// Why a waiting acquire woke to try again.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::telemetry::WakeCause::Message.as_str(), "message");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WakeCause {
    /// A message on the object's channel (a release, a permit given back).
    Message,
    /// Its timer: the lock's expiry or a queue's deadline (the retry hint the last attempt gave),
    /// with no message. Many of these beside few messages are missed wake-ups.
    Timer,
    /// The next step of a spin lock's back-off.
    Backoff,
    /// The subscription connection came back (or moved to a new master) and woke every waiter:
    /// what was published meanwhile reached nobody.
    Reconnect,
}

impl WakeCause {
    /// `"message"`, `"timer"`, `"backoff"` or `"reconnect"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::WakeCause::Backoff.as_str(), "backoff");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            WakeCause::Message => "message",
            WakeCause::Timer => "timer",
            WakeCause::Backoff => "backoff",
            WakeCause::Reconnect => "reconnect",
        }
    }
}

/// What happened to one of a client's connections.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::telemetry::ConnectionChange::Failover.as_str(), "failover");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionChange {
    /// A command found it down (refused, dropped, unanswered); the client reconnects.
    Lost,
    /// A command was answered on it again after it was lost.
    Back,
    /// It moved to a new master: Sentinel named another, or a cluster's slot map changed.
    Failover,
}

impl ConnectionChange {
    /// `"lost"`, `"back"` or `"failover"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::ConnectionChange::Back.as_str(), "back");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ConnectionChange::Lost => "lost",
            ConnectionChange::Back => "back",
            ConnectionChange::Failover => "failover",
        }
    }
}

/// Which of a client's connections an event is about.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::telemetry::ConnectionRole::Command.as_str(), "command");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionRole {
    /// The connection commands and scripts go over.
    Command,
    /// The connection waiters' subscriptions are on.
    Subscription,
}

impl ConnectionRole {
    /// `"command"` or `"subscription"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::ConnectionRole::Subscription.as_str(), "subscription");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ConnectionRole::Command => "command",
            ConnectionRole::Subscription => "subscription",
        }
    }
}

/// What a client tells its [`Recorder`].
///
/// A hold is one owner's tenure of one lock (or one expirable permit): re-entrant acquires add
/// to it and begin nothing; it ends at its full release or when it is found lost, whichever is
/// first (a release of a lost hold ends nothing more). Every `WaitBegan` is followed by one
/// `WaitEnded`, every `HoldBegan` by one `HoldEnded` (a hold still held when the process ends
/// excepted), so a recorder can count what is waiting and held.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::{Event, ObjectType};
/// let event = Event::HoldBegan { object: ObjectType::Semaphore, name: "pool" };
/// assert!(matches!(event, Event::HoldBegan { name: "pool", .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// An acquire (or a latch's wait) began: it is a waiter until its `WaitEnded`.
    WaitBegan {
        /// What it waits for.
        object: ObjectType,
        /// The object's name.
        name: &'a str,
    },
    /// An acquire (or a latch's wait) ended.
    WaitEnded {
        /// What it waited for.
        object: ObjectType,
        /// The object's name.
        name: &'a str,
        /// How it ended.
        outcome: WaitOutcome,
        /// From the call to its end, connecting and local queues included.
        waited: Duration,
    },
    /// A hold began (the first acquire of an owner's tenure).
    HoldBegan {
        /// The held object.
        object: ObjectType,
        /// Its name.
        name: &'a str,
    },
    /// A hold ended.
    HoldEnded {
        /// The held object.
        object: ObjectType,
        /// Its name.
        name: &'a str,
        /// From the winning attempt's send to the release or the finding of the loss.
        held: Duration,
        /// Released or lost.
        end: HoldEnd,
    },
    /// A waiting acquire woke to try again (its first tries, before it waits, are not
    /// wake-ups; one at its deadline, for a last try, is).
    Woken {
        /// What woke it.
        cause: WakeCause,
    },
    /// A watchdog round ended: every watched hold it sent was renewed, found gone (and so
    /// lost), or failed (Redis did not answer; retried within the period).
    RenewalRound {
        /// Holds renewed.
        renewed: u32,
        /// Holds found gone.
        gone: u32,
        /// Holds whose renewal failed.
        failed: u32,
        /// From the round's start to its end.
        took: Duration,
    },
    /// The subscription connection subscribed to a channel (its first waiter came); every
    /// `Subscribed` is followed by one `Unsubscribed`, at the latest when the client closes.
    Subscribed,
    /// The subscription connection left a channel (its last waiter went, or the client closed).
    Unsubscribed,
    /// A connection was lost, came back, or moved to a new master.
    Connection {
        /// What happened.
        change: ConnectionChange,
        /// To which connection.
        role: ConnectionRole,
    },
}

/// Hears a client's [`Event`]s.
///
/// `record` is called on the thread where the event happens (a caller's, or one of crosslock's
/// runtime threads), sometimes while crosslock holds an internal lock: keep it short, never block,
/// and never call crosslock from it. A metrics SDK's instruments (atomic counters and histograms)
/// are the intended use.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use crosslock::telemetry::{Event, Recorder, Telemetry};
///
/// #[derive(Default)]
/// struct Held(AtomicI64);
///
/// impl Recorder for Held {
///     fn record(&self, event: &Event<'_>) {
///         match event {
///             Event::HoldBegan { .. } => { self.0.fetch_add(1, Ordering::Relaxed); }
///             Event::HoldEnded { .. } => { self.0.fetch_sub(1, Ordering::Relaxed); }
///             _ => {}
///         }
///     }
/// }
///
/// let options = crosslock::ClientOptions::new().telemetry(Telemetry::new(Held::default()));
/// # let _ = options;
/// ```
pub trait Recorder: Send + Sync + 'static {
    /// Records one event.
    fn record(&self, event: &Event<'_>);
}

/// A [`Recorder`] as [`ClientOptions::telemetry`](crate::ClientOptions::telemetry) takes it:
/// shared by every handle of the client.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::{Event, Telemetry};
/// let telemetry = Telemetry::from_fn(|event: &Event<'_>| eprintln!("{event:?}"));
/// let options = crosslock::ClientOptions::new().telemetry(telemetry);
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct Telemetry {
    recorder: Arc<dyn Recorder>,
    /// What spans are made with, if any ([`Telemetry::with_spans`]).
    pub(crate) spans: Option<Arc<spans::Spans>>,
}

impl Telemetry {
    /// Telemetry told to `recorder`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use crosslock::telemetry::{Event, Recorder, Telemetry};
    /// struct Quiet;
    /// impl Recorder for Quiet { fn record(&self, _: &Event<'_>) {} }
    /// let telemetry = Telemetry::new(Quiet);
    /// # let _ = telemetry;
    /// ```
    pub fn new(recorder: impl Recorder) -> Self {
        Telemetry {
            recorder: Arc::new(recorder),
            spans: None,
        }
    }

    /// Telemetry told to a function.
    ///
    /// # Examples
    ///
    /// ```
    /// # use crosslock::telemetry::{Event, Telemetry};
    /// let telemetry = Telemetry::from_fn(|event: &Event<'_>| { let _ = event; });
    /// # let _ = telemetry;
    /// ```
    pub fn from_fn(f: impl Fn(&Event<'_>) + Send + Sync + 'static) -> Self {
        struct FnRecorder<F>(F);
        impl<F: Fn(&Event<'_>) + Send + Sync + 'static> Recorder for FnRecorder<F> {
            fn record(&self, event: &Event<'_>) {
                (self.0)(event);
            }
        }
        Telemetry::new(FnRecorder(f))
    }

    /// Makes spans too, for the operations `level` names, and hands each to `exporter` once it
    /// has ended (see [`SpanExporter`] for the spans, [`SpanData`] for what each carries); `names`: the
    /// attribute `crosslock.lock.name` on the spans of an object. Spans are made only where
    /// events are, so a host that wants spans alone gives a recorder that ignores events.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Event, SpanData, SpanExporter, SpanLevel, Telemetry};
    /// struct Print;
    /// impl SpanExporter for Print {
    ///     fn export(&self, span: SpanData) { println!("{}", span.name); }
    /// }
    /// let telemetry = Telemetry::from_fn(|_: &Event<'_>| {})
    ///     .with_spans(Print, SpanLevel::Acquires, false);
    /// # let _ = telemetry;
    /// ```
    pub fn with_spans(
        mut self,
        exporter: impl SpanExporter,
        level: SpanLevel,
        names: bool,
    ) -> Self {
        self.spans = Some(Arc::new(spans::Spans {
            exporter: Arc::new(exporter),
            level,
            names,
        }));
        self
    }

    pub(crate) fn record(&self, event: &Event<'_>) {
        self.recorder.record(event);
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

/// One wait being measured: tells `WaitBegan` when made and `WaitEnded` when
/// [`ended`](Self::ended), or, dropped before that (the caller's future dropped), as cancelled.
pub(crate) struct Waiting<'a> {
    telemetry: &'a Telemetry,
    object: ObjectType,
    name: &'a str,
    start: std::time::Instant,
    ended: bool,
}

impl<'a> Waiting<'a> {
    /// Begins measuring a wait of `object` named `name` that began at `start`; `None` (nothing to
    /// do) without telemetry.
    pub(crate) fn begin(
        telemetry: Option<&'a Telemetry>,
        object: ObjectType,
        name: &'a str,
        start: std::time::Instant,
    ) -> Option<Self> {
        let telemetry = telemetry?;
        telemetry.record(&Event::WaitBegan { object, name });
        Some(Waiting {
            telemetry,
            object,
            name,
            start,
            ended: false,
        })
    }

    /// Ends the wait with the outcome `result` says.
    pub(crate) fn ended<T>(mut self, result: &Result<Option<T>>) {
        self.end(WaitOutcome::of(result));
    }

    fn end(&mut self, outcome: WaitOutcome) {
        self.ended = true;
        self.telemetry.record(&Event::WaitEnded {
            object: self.object,
            name: self.name,
            outcome,
            waited: self.start.elapsed(),
        });
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.end(WaitOutcome::Cancelled);
        }
    }
}

/// Measures the wait `wait` of `object` named `name`, begun at `start`, when there is telemetry.
pub(crate) async fn measured<T>(
    telemetry: Option<&Telemetry>,
    object: ObjectType,
    name: &str,
    start: std::time::Instant,
    wait: impl Future<Output = Result<Option<T>>>,
) -> Result<Option<T>> {
    let Some(waiting) = Waiting::begin(telemetry, object, name, start) else {
        return wait.await;
    };
    let result = spans::acquire(waiting.telemetry, object, name, wait).await;
    waiting.ended(&result);
    result
}
