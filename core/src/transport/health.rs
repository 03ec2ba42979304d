//! Connection health: the one place that logs a connection going down and coming back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether a connection is up, as its last command found it: the one place that logs a
/// connection going down and coming back (once per change, not per failed command).
///
/// A connection that keeps going down and coming back is logged as a warning (and its return as
/// information) at most once per [`FLAP_QUIET`], and at debug level in between: on a cluster
/// whose master is down, the calls for its slots fail while the others succeed, and each
/// failure after a success is a change, so the log grew with the traffic.
pub(super) struct Health {
    /// `command` or `subscription`.
    pub(super) role: &'static str,
    pub(super) down: std::sync::atomic::AtomicBool,
    /// When the last loss was logged as a warning, in ms since `born` (0: never).
    warned_at: AtomicU64,
    /// Whether the current loss was logged as a warning (its return is logged alike).
    loud: std::sync::atomic::AtomicBool,
    born: Instant,
}

/// See [`Health`].
const FLAP_QUIET: Duration = Duration::from_secs(10);

impl Health {
    pub(super) fn new(role: &'static str) -> Self {
        Health {
            role,
            down: false.into(),
            warned_at: AtomicU64::new(0),
            loud: false.into(),
            born: Instant::now(),
        }
    }

    /// Logs the connection lost, if it was up: whether it was.
    pub(super) fn lost(&self, address: &str, why: &dyn std::fmt::Display) -> bool {
        if self.down.swap(true, Ordering::Relaxed) {
            return false;
        }
        let now = self.born.elapsed().as_millis() as u64 + 1;
        let last = self.warned_at.load(Ordering::Relaxed);
        let loud = last == 0 || now >= last + FLAP_QUIET.as_millis() as u64;
        self.loud.store(loud, Ordering::Relaxed);
        if loud {
            self.warned_at.store(now, Ordering::Relaxed);
            tracing::warn!(
                target: "crosslock",
                "{} connection to {address} lost ({why}); reconnecting",
                self.role,
            );
        } else {
            tracing::debug!(
                target: "crosslock",
                "{} connection to {address} lost again ({why}); reconnecting",
                self.role,
            );
        }
        true
    }

    /// Logs the connection back, if it was down: whether it was.
    pub(super) fn answered(&self, address: &str) -> bool {
        let back = self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed);
        if back {
            if self.loud.load(Ordering::Relaxed) {
                tracing::info!(
                    target: "crosslock",
                    "{} connection to {address} is back",
                    self.role,
                );
            } else {
                tracing::debug!(
                    target: "crosslock",
                    "{} connection to {address} is back",
                    self.role,
                );
            }
        }
        back
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::lock;
    use std::sync::Arc;

    /// The level of every `crosslock` event `f` logs.
    fn levels_logged(f: impl FnOnce()) -> Vec<tracing::Level> {
        use tracing_subscriber::layer::SubscriberExt;
        struct Levels(Arc<std::sync::Mutex<Vec<tracing::Level>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Levels {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                lock(&self.0).push(*event.metadata().level());
            }
        }
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Levels(seen.clone()));
        tracing::subscriber::with_default(subscriber, f);
        lock(&seen).clone()
    }

    #[test]
    fn a_flapping_connection_is_told_once_per_quiet_spell() {
        use tracing::Level;
        // Made a minute ago, so that "a quiet spell ago" is a time after it.
        let health = Health {
            born: Instant::now() - Duration::from_secs(60),
            ..Health::new("command")
        };
        let why = "connection refused";
        let first = levels_logged(|| {
            for _ in 0..5 {
                health.lost("127.0.0.1:7000", &why);
                health.lost("127.0.0.1:7000", &why); // the same loss: nothing
                health.answered("127.0.0.1:7000");
                health.answered("127.0.0.1:7000"); // back already: nothing
            }
        });
        // The first loss and return as a warning and information, the flaps after them within
        // FLAP_QUIET at debug level only.
        let mut expected = vec![Level::WARN, Level::INFO];
        expected.extend([Level::DEBUG; 8]);
        assert_eq!(first, expected);
        // FLAP_QUIET later (as if): told again.
        let quiet = FLAP_QUIET.as_millis() as u64;
        let now = health.born.elapsed().as_millis() as u64;
        health.warned_at.store(now - quiet, Ordering::Relaxed);
        let later = levels_logged(|| {
            health.lost("127.0.0.1:7000", &why);
            health.answered("127.0.0.1:7000");
        });
        assert_eq!(later, vec![Level::WARN, Level::INFO]);
    }
}
