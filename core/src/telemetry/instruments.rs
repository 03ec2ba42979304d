//! The instruments crosslock's events are measured on, and how each [`Event`] becomes
//! [`Measurement`]s: one table, read by every exporter (the Rust [`OpenTelemetry`] recorder, the
//! Python and Node bindings), so that an instrument's name, unit, bounds and attributes are
//! spelled once.
//!
//! [`OpenTelemetry`]: crate::telemetry
use super::{Event, HoldEnd};

/// The attribute keys of crosslock's measurements.
pub mod attribute {
    /// The object's type (`lock`, `fair_lock`, …, `semaphore`): see
    /// [`ObjectType::as_str`](super::super::ObjectType::as_str).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::OBJECT_TYPE, "crosslock.object.type");
    /// ```
    pub const OBJECT_TYPE: &str = "crosslock.object.type";
    /// How a wait ended (`acquired`, `timeout`, `cancelled`, `unavailable`, `error`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::OUTCOME, "crosslock.outcome");
    /// ```
    pub const OUTCOME: &str = "crosslock.outcome";
    /// How a hold ended (`released`, `lost`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::HOLD_END, "crosslock.hold.end");
    /// ```
    pub const HOLD_END: &str = "crosslock.hold.end";
    /// Why a hold was lost (`gone`, `expired`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::LOST_REASON, "crosslock.lost.reason");
    /// ```
    pub const LOST_REASON: &str = "crosslock.lost.reason";
    /// What woke a waiter (`message`, `timer`, `backoff`, `reconnect`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::WAKE_CAUSE, "crosslock.wake.cause");
    /// ```
    pub const WAKE_CAUSE: &str = "crosslock.wake.cause";
    /// What a watchdog renewal found (`renewed`, `gone`, `failed`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::RENEWAL_OUTCOME, "crosslock.renewal.outcome");
    /// ```
    pub const RENEWAL_OUTCOME: &str = "crosslock.renewal.outcome";
    /// What happened to a connection (`lost`, `back`, `failover`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::CONNECTION_EVENT, "crosslock.connection.event");
    /// ```
    pub const CONNECTION_EVENT: &str = "crosslock.connection.event";
    /// Which connection (`command`, `subscription`).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::CONNECTION_ROLE, "crosslock.connection.role");
    /// ```
    pub const CONNECTION_ROLE: &str = "crosslock.connection.role";
    /// The object's name: added only when an exporter is asked to (one series per name).
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::attribute::LOCK_NAME, "crosslock.lock.name");
    /// ```
    pub const LOCK_NAME: &str = "crosslock.lock.name";
}

/// What kind of instrument an [`Instrument`] is.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::{Instrument, InstrumentKind};
/// assert_eq!(Instrument::Held.kind(), InstrumentKind::UpDownCounter);
/// assert_eq!(InstrumentKind::UpDownCounter.as_str(), "up_down_counter");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstrumentKind {
    /// A histogram of seconds.
    Histogram,
    /// A monotonic counter.
    Counter,
    /// A counter that goes up and down: what there is now.
    UpDownCounter,
}

impl InstrumentKind {
    /// `"histogram"`, `"counter"` or `"up_down_counter"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::InstrumentKind;
    /// assert_eq!(InstrumentKind::Histogram.as_str(), "histogram");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            InstrumentKind::Histogram => "histogram",
            InstrumentKind::Counter => "counter",
            InstrumentKind::UpDownCounter => "up_down_counter",
        }
    }
}

/// One of the instruments crosslock measures on.
///
/// | instrument | kind | unit | attributes |
/// | --- | --- | --- | --- |
/// | `crosslock.lock.wait.duration` | histogram | s | `crosslock.object.type`, `crosslock.outcome` |
/// | `crosslock.lock.waiters` | up-down counter | `{waiter}` | `crosslock.object.type` |
/// | `crosslock.lock.hold.duration` | histogram | s | `crosslock.object.type`, `crosslock.hold.end` |
/// | `crosslock.lock.held` | up-down counter | `{hold}` | `crosslock.object.type` |
/// | `crosslock.lock.lost` | counter | `{hold}` | `crosslock.object.type`, `crosslock.lost.reason` |
/// | `crosslock.wait.wakeups` | counter | `{wakeup}` | `crosslock.wake.cause` |
/// | `crosslock.watchdog.renewals` | counter | `{hold}` | `crosslock.renewal.outcome` |
/// | `crosslock.watchdog.renewal.duration` | histogram | s | (none) |
/// | `crosslock.pubsub.subscriptions` | up-down counter | `{subscription}` | (none) |
/// | `crosslock.connection.events` | counter | `{event}` | `crosslock.connection.event`, `crosslock.connection.role` |
///
/// The lock-scoped ones (the first five) can carry `crosslock.lock.name` too
/// ([`Measurement::name`]).
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::Instrument;
/// assert_eq!(Instrument::WaitDuration.name(), "crosslock.lock.wait.duration");
/// assert_eq!(Instrument::WaitDuration.unit(), "s");
/// assert!(Instrument::ALL.iter().all(|i| i.name().starts_with("crosslock.")));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Instrument {
    /// `crosslock.lock.wait.duration`: how long acquires (and latch waits) waited.
    WaitDuration,
    /// `crosslock.lock.waiters`: acquires (and latch waits) waiting now.
    Waiters,
    /// `crosslock.lock.hold.duration`: how long holds lasted.
    HoldDuration,
    /// `crosslock.lock.held`: holds held now.
    Held,
    /// `crosslock.lock.lost`: holds found lost.
    Lost,
    /// `crosslock.wait.wakeups`: waiting acquires woken to try again.
    Wakeups,
    /// `crosslock.watchdog.renewals`: holds a watchdog round renewed, found gone, or failed to.
    Renewals,
    /// `crosslock.watchdog.renewal.duration`: how long a watchdog round took.
    RenewalDuration,
    /// `crosslock.pubsub.subscriptions`: channels the client's subscription connection is
    /// subscribed to now.
    Subscriptions,
    /// `crosslock.connection.events`: connections lost, back, and moved by a failover.
    ConnectionEvents,
}

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
/// Bucket bounds of the renewal round histogram, in seconds: from one pipelined round trip to a
/// round held up by a master that stopped answering.
const ROUND_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl Instrument {
    /// Every instrument, in the table's order.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert_eq!(Instrument::ALL[0], Instrument::WaitDuration);
    /// ```
    pub const ALL: [Instrument; 10] = [
        Instrument::WaitDuration,
        Instrument::Waiters,
        Instrument::HoldDuration,
        Instrument::Held,
        Instrument::Lost,
        Instrument::Wakeups,
        Instrument::Renewals,
        Instrument::RenewalDuration,
        Instrument::Subscriptions,
        Instrument::ConnectionEvents,
    ];

    /// Its place in [`ALL`](Self::ALL): how a binding names it across its boundary.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert!(Instrument::ALL.iter().enumerate().all(|(i, x)| x.index() == i));
    /// ```
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its OpenTelemetry name.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert_eq!(Instrument::Lost.name(), "crosslock.lock.lost");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Instrument::WaitDuration => "crosslock.lock.wait.duration",
            Instrument::Waiters => "crosslock.lock.waiters",
            Instrument::HoldDuration => "crosslock.lock.hold.duration",
            Instrument::Held => "crosslock.lock.held",
            Instrument::Lost => "crosslock.lock.lost",
            Instrument::Wakeups => "crosslock.wait.wakeups",
            Instrument::Renewals => "crosslock.watchdog.renewals",
            Instrument::RenewalDuration => "crosslock.watchdog.renewal.duration",
            Instrument::Subscriptions => "crosslock.pubsub.subscriptions",
            Instrument::ConnectionEvents => "crosslock.connection.events",
        }
    }

    /// Its kind.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Instrument, InstrumentKind};
    /// assert_eq!(Instrument::Renewals.kind(), InstrumentKind::Counter);
    /// ```
    pub const fn kind(self) -> InstrumentKind {
        match self {
            Instrument::WaitDuration | Instrument::HoldDuration | Instrument::RenewalDuration => {
                InstrumentKind::Histogram
            }
            Instrument::Waiters | Instrument::Held | Instrument::Subscriptions => {
                InstrumentKind::UpDownCounter
            }
            Instrument::Lost
            | Instrument::Wakeups
            | Instrument::Renewals
            | Instrument::ConnectionEvents => InstrumentKind::Counter,
        }
    }

    /// Its unit, in UCUM as OpenTelemetry writes it: `s`, or an annotation such as `{hold}`.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert_eq!(Instrument::Subscriptions.unit(), "{subscription}");
    /// ```
    pub const fn unit(self) -> &'static str {
        match self {
            Instrument::WaitDuration | Instrument::HoldDuration | Instrument::RenewalDuration => {
                "s"
            }
            Instrument::Waiters => "{waiter}",
            Instrument::Held | Instrument::Lost | Instrument::Renewals => "{hold}",
            Instrument::Wakeups => "{wakeup}",
            Instrument::Subscriptions => "{subscription}",
            Instrument::ConnectionEvents => "{event}",
        }
    }

    /// Its description.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert!(Instrument::Held.description().contains("holds"));
    /// ```
    pub const fn description(self) -> &'static str {
        match self {
            Instrument::WaitDuration => {
                "How long acquires (and latch waits) waited, by how they ended"
            }
            Instrument::Waiters => "Acquires (and latch waits) of this process waiting now",
            Instrument::HoldDuration => "How long holds lasted, until released or found lost",
            Instrument::Held => "Locks and expirable permits this process holds now",
            Instrument::Lost => "Holds found lost, by why",
            Instrument::Wakeups => {
                "Waiting acquires woken to try again, by what woke them (timer wake-ups beside \
                 few messages are missed wake-ups)"
            }
            Instrument::Renewals => {
                "Watchdog renewals of holds, by what they found (failed ones are retried)"
            }
            Instrument::RenewalDuration => "How long a watchdog renewal round took",
            Instrument::Subscriptions => {
                "Channels this client's subscription connection is subscribed to now"
            }
            Instrument::ConnectionEvents => {
                "Connections lost, back, and moved to a new master by a failover"
            }
        }
    }

    /// A histogram's bucket bounds, in seconds (empty for the others).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::Instrument;
    /// assert_eq!(Instrument::HoldDuration.bounds().last(), Some(&3600.0));
    /// assert!(Instrument::Held.bounds().is_empty());
    /// ```
    pub const fn bounds(self) -> &'static [f64] {
        match self {
            Instrument::WaitDuration => WAIT_BOUNDS,
            Instrument::HoldDuration => HOLD_BOUNDS,
            Instrument::RenewalDuration => ROUND_BOUNDS,
            _ => &[],
        }
    }

    /// The attribute keys its measurements carry (besides [`attribute::LOCK_NAME`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Instrument, attribute};
    /// assert_eq!(Instrument::Lost.attributes(), [attribute::OBJECT_TYPE, attribute::LOST_REASON]);
    /// ```
    pub const fn attributes(self) -> &'static [&'static str] {
        use attribute::*;
        match self {
            Instrument::WaitDuration => &[OBJECT_TYPE, OUTCOME],
            Instrument::Waiters | Instrument::Held => &[OBJECT_TYPE],
            Instrument::HoldDuration => &[OBJECT_TYPE, HOLD_END],
            Instrument::Lost => &[OBJECT_TYPE, LOST_REASON],
            Instrument::Wakeups => &[WAKE_CAUSE],
            Instrument::Renewals => &[RENEWAL_OUTCOME],
            Instrument::RenewalDuration | Instrument::Subscriptions => &[],
            Instrument::ConnectionEvents => &[CONNECTION_EVENT, CONNECTION_ROLE],
        }
    }
}

/// One value recorded on one instrument: a histogram's seconds, or what a counter adds (an
/// up-down counter's is 1 or -1).
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::{Event, Instrument, ObjectType};
/// let event = Event::HoldBegan { object: ObjectType::Semaphore, name: "pool" };
/// let measured: Vec<_> = event.measurements().collect();
/// assert_eq!(measured[0].instrument, Instrument::Held);
/// assert_eq!(measured[0].value, 1.0);
/// assert_eq!(measured[0].attributes(), &[("crosslock.object.type", "semaphore")]);
/// assert_eq!(measured[0].name, Some("pool"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement<'a> {
    /// What it is recorded on.
    pub instrument: Instrument,
    /// The value.
    pub value: f64,
    /// The object's name, for the lock-scoped instruments (an exporter adds it as
    /// [`attribute::LOCK_NAME`] only when asked to).
    pub name: Option<&'a str>,
    attributes: [(&'static str, &'static str); 2],
    len: u8,
}

impl<'a> Measurement<'a> {
    fn new(
        instrument: Instrument,
        value: f64,
        name: Option<&'a str>,
        attributes: &[(&'static str, &'static str)],
    ) -> Self {
        let mut fixed = [("", ""); 2];
        fixed[..attributes.len()].copy_from_slice(attributes);
        Measurement {
            instrument,
            value,
            name,
            attributes: fixed,
            len: attributes.len() as u8,
        }
    }

    /// Its attributes (keys from [`attribute`]), in the order of
    /// [`Instrument::attributes`].
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Event, WakeCause};
    /// let woken = Event::Woken { cause: WakeCause::Message };
    /// let m = woken.measurements().next().unwrap();
    /// assert_eq!(m.attributes(), [("crosslock.wake.cause", "message")]);
    /// ```
    pub fn attributes(&self) -> &[(&'static str, &'static str)] {
        &self.attributes[..self.len as usize]
    }

    /// The measurement without its object's name, to keep beyond the event (a binding queues it,
    /// the name copied beside it when asked for).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Event, ObjectType};
    /// let event = Event::HoldBegan { object: ObjectType::Semaphore, name: "pool" };
    /// let kept = event.measurements().next().unwrap().unnamed();
    /// assert_eq!(kept.name, None);
    /// assert_eq!(kept.attributes(), [("crosslock.object.type", "semaphore")]);
    /// ```
    pub fn unnamed(self) -> Measurement<'static> {
        Measurement {
            instrument: self.instrument,
            value: self.value,
            name: None,
            attributes: self.attributes,
            len: self.len,
        }
    }
}

impl<'a> Event<'a> {
    /// What the event records, on which instruments (none, one or several).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Event, Instrument, WakeCause};
    /// let woken = Event::Woken { cause: WakeCause::Timer };
    /// let measured: Vec<_> = woken.measurements().map(|m| m.instrument).collect();
    /// assert_eq!(measured, [Instrument::Wakeups]);
    /// ```
    pub fn measurements(&self) -> impl Iterator<Item = Measurement<'a>> + use<'a> {
        use attribute::*;
        let mut out: [Option<Measurement<'a>>; 4] = [None; 4];
        match *self {
            Event::WaitBegan { object, name } => {
                let ty = (OBJECT_TYPE, object.as_str());
                out[0] = Some(Measurement::new(
                    Instrument::Waiters,
                    1.0,
                    Some(name),
                    &[ty],
                ));
            }
            Event::WaitEnded {
                object,
                name,
                outcome,
                waited,
            } => {
                let ty = (OBJECT_TYPE, object.as_str());
                out[0] = Some(Measurement::new(
                    Instrument::Waiters,
                    -1.0,
                    Some(name),
                    &[ty],
                ));
                out[1] = Some(Measurement::new(
                    Instrument::WaitDuration,
                    waited.as_secs_f64(),
                    Some(name),
                    &[ty, (OUTCOME, outcome.as_str())],
                ));
            }
            Event::HoldBegan { object, name } => {
                let ty = (OBJECT_TYPE, object.as_str());
                out[0] = Some(Measurement::new(Instrument::Held, 1.0, Some(name), &[ty]));
            }
            Event::HoldEnded {
                object,
                name,
                held,
                end,
            } => {
                let ty = (OBJECT_TYPE, object.as_str());
                let how = match end {
                    HoldEnd::Released => "released",
                    HoldEnd::Lost(_) => "lost",
                };
                out[0] = Some(Measurement::new(Instrument::Held, -1.0, Some(name), &[ty]));
                out[1] = Some(Measurement::new(
                    Instrument::HoldDuration,
                    held.as_secs_f64(),
                    Some(name),
                    &[ty, (HOLD_END, how)],
                ));
                if let HoldEnd::Lost(reason) = end {
                    out[2] = Some(Measurement::new(
                        Instrument::Lost,
                        1.0,
                        Some(name),
                        &[ty, (LOST_REASON, reason.as_str())],
                    ));
                }
            }
            Event::Woken { cause } => {
                out[0] = Some(Measurement::new(
                    Instrument::Wakeups,
                    1.0,
                    None,
                    &[(WAKE_CAUSE, cause.as_str())],
                ));
            }
            Event::RenewalRound {
                renewed,
                gone,
                failed,
                took,
            } => {
                let counts = [("renewed", renewed), ("gone", gone), ("failed", failed)];
                for (slot, (outcome, count)) in out.iter_mut().zip(counts) {
                    *slot = (count > 0).then(|| {
                        Measurement::new(
                            Instrument::Renewals,
                            f64::from(count),
                            None,
                            &[(RENEWAL_OUTCOME, outcome)],
                        )
                    });
                }
                out[3] = Some(Measurement::new(
                    Instrument::RenewalDuration,
                    took.as_secs_f64(),
                    None,
                    &[],
                ));
            }
            Event::Subscribed => {
                out[0] = Some(Measurement::new(Instrument::Subscriptions, 1.0, None, &[]));
            }
            Event::Unsubscribed => {
                out[0] = Some(Measurement::new(Instrument::Subscriptions, -1.0, None, &[]));
            }
            Event::Connection { change, role } => {
                out[0] = Some(Measurement::new(
                    Instrument::ConnectionEvents,
                    1.0,
                    None,
                    &[
                        (CONNECTION_EVENT, change.as_str()),
                        (CONNECTION_ROLE, role.as_str()),
                    ],
                ));
            }
        }
        out.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{ConnectionChange, ConnectionRole, ObjectType, WaitOutcome};
    use std::time::Duration;

    /// Every event of every kind, once.
    fn every_event() -> Vec<Event<'static>> {
        let object = ObjectType::Lock(crate::LockKind::Lock);
        vec![
            Event::WaitBegan { object, name: "a" },
            Event::WaitEnded {
                object,
                name: "a",
                outcome: WaitOutcome::Timeout,
                waited: Duration::from_millis(5),
            },
            Event::HoldBegan { object, name: "a" },
            Event::HoldEnded {
                object,
                name: "a",
                held: Duration::from_millis(5),
                end: HoldEnd::Lost(crate::LostReason::Gone),
            },
            Event::Woken {
                cause: crate::telemetry::WakeCause::Message,
            },
            Event::RenewalRound {
                renewed: 3,
                gone: 1,
                failed: 2,
                took: Duration::from_millis(1),
            },
            Event::Subscribed,
            Event::Unsubscribed,
            Event::Connection {
                change: ConnectionChange::Failover,
                role: ConnectionRole::Subscription,
            },
        ]
    }

    #[test]
    fn every_measurement_carries_its_instruments_attributes_in_order() {
        let mut seen = std::collections::HashSet::new();
        for event in every_event() {
            for m in event.measurements() {
                seen.insert(m.instrument);
                let keys: Vec<_> = m.attributes().iter().map(|(k, _)| *k).collect();
                assert_eq!(keys, m.instrument.attributes(), "{m:?}");
                assert_eq!(
                    m.name.is_some(),
                    m.instrument.attributes().first() == Some(&attribute::OBJECT_TYPE),
                    "only the lock-scoped instruments carry a name: {m:?}"
                );
                if m.instrument.kind() == InstrumentKind::Counter {
                    assert!(m.value >= 1.0 && m.value.fract() == 0.0, "{m:?}");
                }
            }
        }
        assert_eq!(
            seen.len(),
            Instrument::ALL.len(),
            "every instrument is measured"
        );
    }

    #[test]
    fn histograms_have_rising_bounds_and_the_rest_none() {
        for instrument in Instrument::ALL {
            let bounds = instrument.bounds();
            match instrument.kind() {
                InstrumentKind::Histogram => {
                    assert!(!bounds.is_empty());
                    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{instrument:?}");
                    assert_eq!(instrument.unit(), "s");
                }
                _ => assert!(bounds.is_empty(), "{instrument:?}"),
            }
        }
    }

    #[test]
    fn a_round_tells_only_the_outcomes_it_had() {
        let round = Event::RenewalRound {
            renewed: 4,
            gone: 0,
            failed: 0,
            took: Duration::from_millis(2),
        };
        let measured: Vec<_> = round
            .measurements()
            .map(|m| (m.instrument, m.value, m.attributes().to_vec()))
            .collect();
        assert_eq!(
            measured,
            [
                (
                    Instrument::Renewals,
                    4.0,
                    vec![(attribute::RENEWAL_OUTCOME, "renewed")]
                ),
                (Instrument::RenewalDuration, 0.002, vec![]),
            ]
        );
    }
}
