//! Support for the language bindings (Python, Node); not part of the Rust API.
//!
//! What both bindings would otherwise each write: durations from a host's numbers with the same
//! range checks, and "acquire, or build the timeout error".

use std::sync::Arc;
use std::time::Duration;

use crate::engine::MAX_DURATION;
use crate::{AcquireOptions, Acquisition, AnyLock, Error, Owner, Result};

/// Converts `value` in `unit_seconds` (1.0 for seconds, 0.001 for milliseconds) to a duration,
/// rejecting what no duration crosslock accepts can be: negative, NaN, infinite, or longer than
/// [`MAX_DURATION`]. `what` names the argument in the message ("the lease of lock 'x'").
pub fn duration(value: f64, unit_seconds: f64, what: &str) -> Result<Duration> {
    let unit = if unit_seconds >= 1.0 {
        "seconds"
    } else {
        "milliseconds"
    };
    if !value.is_finite() || value < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a finite number of {unit} ≥ 0, got {value}"
        )));
    }
    // Milliseconds are taken as they are: a JavaScript number of ms is exact up to 2^53.
    let ms = if unit_seconds == 0.001 {
        value
    } else {
        value * unit_seconds * 1000.0
    };
    if ms > MAX_DURATION.as_millis() as f64 {
        return Err(Error::invalid(format!(
            "{what} is too large: {} {unit}; the longest is 2^53-1 ms (about 285,000 years)",
            Shown(value)
        )));
    }
    let whole = ms.trunc();
    Ok(Duration::from_millis(whole as u64) + Duration::from_nanos(((ms - whole) * 1e6) as u64))
}

/// A number as a message shows it: `1e300`, not its 301 digits.
struct Shown(f64);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.abs() >= 1e16 {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A lease from a host's number: as [`duration`], and under 1 ms refused (Redis counts leases in
/// whole milliseconds, so it would be a zero lease).
pub fn lease(value: f64, unit_seconds: f64, what: &str) -> Result<Duration> {
    let lease = duration(value, unit_seconds, what)?;
    if lease < Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "{what} must be at least 1 ms, got {value}; leave it out for watchdog renewal"
        )));
    }
    Ok(lease)
}

/// An [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) error, for arguments a
/// binding checks itself.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(message)
}

/// A [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error with `message`, for composites a
/// binding reports itself.
pub fn timeout(message: impl Into<String>, waited: Duration) -> Error {
    Error::new(crate::ErrorKind::Timeout, message).with_waited(waited)
}

/// Acquires `lock` for `owner`; when the wait limit passes, `Ok(None)`, or the timeout error when
/// `raise_timeout`.
///
/// # Cancel safety
///
/// As the lock's own `acquire_as`: dropping the future gives back a hold won meanwhile.
pub async fn acquire(
    lock: &Arc<dyn AnyLock>,
    owner: Owner,
    options: &AcquireOptions,
    raise_timeout: bool,
) -> Result<Option<Acquisition>> {
    let acquired = lock.acquire_as(owner, options).await?;
    if acquired.is_none() && raise_timeout {
        return Err(lock
            .timeout_error(owner, options.wait.unwrap_or_default())
            .await);
    }
    Ok(acquired)
}

/// The lock of kind `kind` named `name`, erased, as a binding that addresses the lock family by
/// `(kind, name)` makes it for a call (the Node binding): cheap, no Redis call. A spin lock takes
/// `backoff` (Redisson's when `None`; other kinds ignore it); a group lock's `name` is
/// `<group>#<field>,<field>…`, its fields as [`GroupLock::fields`](crate::GroupLock::fields)
/// gives them. A permit is not made by kind (it comes from its semaphore).
pub fn lock_of(
    client: &crate::Client,
    kind: crate::LockKind,
    name: &str,
    backoff: Option<crate::Backoff>,
) -> Result<Arc<dyn AnyLock>> {
    use crate::LockKind;
    match kind {
        LockKind::Lock => client.lock(name).map(|l| l.erased()),
        LockKind::FairLock => client.fair_lock(name).map(|l| l.erased()),
        LockKind::SpinLock => match backoff {
            None => client.spin_lock(name).map(|l| l.erased()),
            Some(b) => client.spin_lock_with(name, b).map(|l| l.erased()),
        },
        LockKind::FencedLock => client.fenced_lock(name).map(|l| l.erased()),
        LockKind::NonReentrantLock => client.non_reentrant_lock(name).map(|l| l.erased()),
        LockKind::NonReentrantFairLock => client.non_reentrant_fair_lock(name).map(|l| l.erased()),
        LockKind::ReadLock => client.read_write_lock(name).map(|rw| rw.read().erased()),
        LockKind::WriteLock => client.read_write_lock(name).map(|rw| rw.write().erased()),
        LockKind::GroupLock => {
            let (group, fields) = name.rsplit_once('#').unwrap_or((name, ""));
            client
                .group_lock_by_fields(group, fields.split(',').filter(|f| !f.is_empty()))
                .map(|l| l.erased())
        }
        LockKind::Permit => Err(Error::invalid(format!(
            "a permit of '{name}' is not made by kind: it comes from its semaphore's acquire"
        ))),
    }
}

/// The text of one of crosslock's `tracing` events, as the bindings' log bridges print it: the
/// message, then any other fields as ` name=value`.
pub fn event_text(event: &tracing::Event<'_>) -> String {
    struct Text(String);
    impl tracing::field::Visit for Text {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            use std::fmt::Write;
            let _ = if field.name() == "message" {
                write!(self.0, "{value:?}")
            } else {
                write!(self.0, " {}={value:?}", field.name())
            };
        }
    }
    let mut text = Text(String::new());
    event.record(&mut text);
    text.0
}

/// Sets the language part of this process's connection names (`py`, `js`): see
/// [`naming`](crate::naming). Called once by a binding when it loads.
pub fn set_language(language: &'static str) {
    crate::naming::set_language(language);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_reject_negative_nan_and_huge() {
        assert!(duration(-1.0, 1.0, "wait").is_err());
        assert!(duration(f64::NAN, 1.0, "wait").is_err());
        assert!(duration(f64::INFINITY, 0.001, "lease").is_err());
        assert!(duration(1e19, 1.0, "wait").is_err());
        assert!(duration(1e19, 0.001, "lease").is_err());
        assert!(duration(18446744073709551616.0 + 1.0, 0.001, "lease").is_err());
        assert_eq!(duration(1500.0, 0.001, "lease").unwrap().as_millis(), 1500);
        assert_eq!(duration(0.25, 1.0, "wait").unwrap().as_millis(), 250);
        assert!(lease(0.0004, 1.0, "lease").is_err());
        assert_eq!(
            lease(9007199254740991.0, 0.001, "lease").unwrap(),
            MAX_DURATION
        );
    }

    #[test]
    fn a_huge_duration_is_shown_short() {
        let err = duration(1e300, 1.0, "the timeout for lock 'x'").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the timeout for lock 'x' is too large: 1e300 seconds; the longest is 2^53-1 ms \
             (about 285,000 years)"
        );
        let err = duration(9007199254740993.0, 0.001, "lease").unwrap_err();
        assert!(
            err.to_string().contains("9007199254740992 milliseconds"),
            "{err}"
        );
    }
}
