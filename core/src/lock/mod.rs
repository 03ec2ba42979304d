//! The lock types. Each supplies its scripts and channel to the shared machinery in
//! [`crate::wait`] (waiting), [`crate::pubsub`] (wake-ups) and [`crate::watchdog`] (renewal).

#[allow(clippy::module_inception)]
mod lock;

pub use lock::{AcquireOptions, Lock, LockGuard};
pub(crate) use lock::release_all as release_all_for;

/// Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when the name already has braces.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

/// Converts seconds (a binding's float) to a duration, rejecting what no duration can be.
pub fn duration_from_secs(value: f64, what: &str) -> crate::Result<std::time::Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(crate::Error::invalid(format!(
            "{what} must be a finite number of seconds ≥ 0, got {value}"
        )));
    }
    std::time::Duration::try_from_secs_f64(value)
        .map_err(|_| crate::Error::invalid(format!("{what} is too large: {value} seconds")))
}

/// Converts milliseconds (a binding's number) to a duration, rejecting what no duration can be.
pub fn duration_from_millis(value: f64, what: &str) -> crate::Result<std::time::Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(crate::Error::invalid(format!(
            "{what} must be a finite number of milliseconds ≥ 0, got {value}"
        )));
    }
    std::time::Duration::try_from_secs_f64(value / 1000.0)
        .map_err(|_| crate::Error::invalid(format!("{what} is too large: {value} ms")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_adds_hash_tag_once() {
        assert_eq!(prefix_name("redisson_lock__channel", "orders:42"), "redisson_lock__channel:{orders:42}");
        assert_eq!(prefix_name("redisson_lock__channel", "{user:1}:lock"), "redisson_lock__channel:{user:1}:lock");
    }

    #[test]
    fn durations_reject_negative_and_nan() {
        assert!(duration_from_secs(-1.0, "wait").is_err());
        assert!(duration_from_secs(f64::NAN, "wait").is_err());
        assert!(duration_from_millis(f64::INFINITY, "lease").is_err());
        assert_eq!(duration_from_millis(1500.0, "lease").unwrap().as_millis(), 1500);
        assert_eq!(duration_from_secs(0.25, "wait").unwrap().as_millis(), 250);
    }
}
