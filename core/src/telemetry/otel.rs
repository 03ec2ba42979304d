//! [`OpenTelemetry`]: a [`Recorder`] that records a client's events as OpenTelemetry metrics
//! (the cargo feature `opentelemetry`).

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

use super::{Event, HoldEnd, ObjectType, Recorder, Telemetry};

/// The attribute naming the object's type (`lock`, `fair_lock`, …, `semaphore`).
const OBJECT_TYPE: &str = "crosslock.object.type";
/// The attribute naming how a wait ended (`acquired`, `timeout`, …).
const OUTCOME: &str = "crosslock.outcome";
/// The attribute naming how a hold ended (`released`, `lost`).
const HOLD_END: &str = "crosslock.hold.end";
/// The attribute naming why a hold was lost (`gone`, `expired`).
const LOST_REASON: &str = "crosslock.lost.reason";
/// The attribute naming what woke a waiter (`message`, `timer`, `backoff`).
const WAKE_CAUSE: &str = "crosslock.wake.cause";
/// The attribute naming the object (only with [`OpenTelemetry::with_lock_names`]).
const LOCK_NAME: &str = "crosslock.lock.name";

/// Bucket bounds of the wait histogram, in seconds: from an uncontended acquire's fraction of a
/// millisecond to a minute's wait.
const WAIT_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
/// Bucket bounds of the hold histogram, in seconds: from a millisecond's critical section to an
/// hour's job.
const HOLD_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Records a client's waits and holds as OpenTelemetry metrics on a [`Meter`]:
///
/// | instrument | kind | unit | attributes |
/// | --- | --- | --- | --- |
/// | `crosslock.lock.wait.duration` | histogram | s | `crosslock.object.type`, `crosslock.outcome` |
/// | `crosslock.lock.waiters` | up-down counter | `{waiter}` | `crosslock.object.type` |
/// | `crosslock.lock.hold.duration` | histogram | s | `crosslock.object.type`, `crosslock.hold.end` |
/// | `crosslock.lock.held` | up-down counter | `{hold}` | `crosslock.object.type` |
/// | `crosslock.lock.lost` | counter | `{hold}` | `crosslock.object.type`, `crosslock.lost.reason` |
/// | `crosslock.wait.wakeups` | counter | `{wakeup}` | `crosslock.wake.cause` |
///
/// Lock names are not attributes (one series per lock name would be unbounded); turn them on
/// with [`with_lock_names`](Self::with_lock_names) where names are few.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> crosslock::Result<()> {
/// use crosslock::{Client, ClientOptions, telemetry::OpenTelemetry};
/// let meter = opentelemetry::global::meter("orders-service");
/// let options = ClientOptions::new().telemetry(OpenTelemetry::new(&meter).into());
/// let client = Client::connect_with("redis://127.0.0.1:6379/0", options).await?;
/// # client.close().await; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenTelemetry {
    wait: Histogram<f64>,
    waiters: UpDownCounter<i64>,
    hold: Histogram<f64>,
    held: UpDownCounter<i64>,
    lost: Counter<u64>,
    wakeups: Counter<u64>,
    names: bool,
}

impl OpenTelemetry {
    /// The instruments, made on `meter`.
    ///
    /// # Examples
    ///
    /// ```
    /// let meter = opentelemetry::global::meter("orders-service");
    /// let recorder = crosslock::telemetry::OpenTelemetry::new(&meter);
    /// # let _ = recorder;
    /// ```
    pub fn new(meter: &Meter) -> Self {
        OpenTelemetry {
            wait: meter
                .f64_histogram("crosslock.lock.wait.duration")
                .with_unit("s")
                .with_description("How long acquires (and latch waits) waited, by how they ended")
                .with_boundaries(WAIT_BOUNDS.to_vec())
                .build(),
            waiters: meter
                .i64_up_down_counter("crosslock.lock.waiters")
                .with_unit("{waiter}")
                .with_description("Acquires (and latch waits) of this process waiting now")
                .build(),
            hold: meter
                .f64_histogram("crosslock.lock.hold.duration")
                .with_unit("s")
                .with_description("How long holds lasted, until released or found lost")
                .with_boundaries(HOLD_BOUNDS.to_vec())
                .build(),
            held: meter
                .i64_up_down_counter("crosslock.lock.held")
                .with_unit("{hold}")
                .with_description("Locks and expirable permits this process holds now")
                .build(),
            lost: meter
                .u64_counter("crosslock.lock.lost")
                .with_unit("{hold}")
                .with_description("Holds found lost, by why")
                .build(),
            wakeups: meter
                .u64_counter("crosslock.wait.wakeups")
                .with_unit("{wakeup}")
                .with_description(
                    "Waiting acquires woken to try again, by what woke them (timer wake-ups \
                     beside few messages are missed wake-ups)",
                )
                .build(),
            names: false,
        }
    }

    /// Adds the attribute `crosslock.lock.name` (the object's name) to every measurement: one
    /// series per name, so only where names are few.
    ///
    /// # Examples
    ///
    /// ```
    /// let meter = opentelemetry::global::meter("orders-service");
    /// let recorder = crosslock::telemetry::OpenTelemetry::new(&meter).with_lock_names(true);
    /// # let _ = recorder;
    /// ```
    pub fn with_lock_names(mut self, names: bool) -> Self {
        self.names = names;
        self
    }

    /// The attributes of a measurement of `object` named `name`, then `more`.
    fn attributes<const N: usize>(
        &self,
        object: ObjectType,
        name: &str,
        more: [KeyValue; N],
    ) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(2 + N);
        attributes.push(KeyValue::new(OBJECT_TYPE, object.as_str()));
        attributes.extend(more);
        if self.names {
            attributes.push(KeyValue::new(LOCK_NAME, name.to_owned()));
        }
        attributes
    }
}

impl Recorder for OpenTelemetry {
    fn record(&self, event: &Event<'_>) {
        match *event {
            Event::WaitBegan { object, name } => {
                self.waiters.add(1, &self.attributes(object, name, []));
            }
            Event::WaitEnded {
                object,
                name,
                outcome,
                waited,
            } => {
                self.waiters.add(-1, &self.attributes(object, name, []));
                let attributes =
                    self.attributes(object, name, [KeyValue::new(OUTCOME, outcome.as_str())]);
                self.wait.record(waited.as_secs_f64(), &attributes);
            }
            Event::HoldBegan { object, name } => {
                self.held.add(1, &self.attributes(object, name, []));
            }
            Event::HoldEnded {
                object,
                name,
                held,
                end,
            } => {
                self.held.add(-1, &self.attributes(object, name, []));
                let how = match end {
                    HoldEnd::Released => "released",
                    HoldEnd::Lost(_) => "lost",
                };
                let attributes = self.attributes(object, name, [KeyValue::new(HOLD_END, how)]);
                self.hold.record(held.as_secs_f64(), &attributes);
                if let HoldEnd::Lost(reason) = end {
                    let attributes = self.attributes(
                        object,
                        name,
                        [KeyValue::new(LOST_REASON, reason.as_str())],
                    );
                    self.lost.add(1, &attributes);
                }
            }
            Event::Woken { cause } => {
                self.wakeups
                    .add(1, &[KeyValue::new(WAKE_CAUSE, cause.as_str())]);
            }
        }
    }
}

impl From<OpenTelemetry> for Telemetry {
    /// The recorder as [`ClientOptions::telemetry`](crate::ClientOptions::telemetry) takes it.
    fn from(recorder: OpenTelemetry) -> Self {
        Telemetry::new(recorder)
    }
}
