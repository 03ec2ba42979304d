//! The range of every whole-number argument, spelled once.
//!
//! Core checks its own arguments against these before it sends anything, and both bindings read
//! the same table (Python's `_native.LIMITS`, Node's `limits()` of the native module) to check a
//! host number before it is converted, so a value refused in one language is refused in every
//! one, with the same bounds in the message. Durations are checked by `ffi::duration` and
//! `ffi::lease` against [`MAX_DURATION`](crate::MAX_DURATION) (2^53−1 ms), which
//! [`LEASE_MS`] and [`DURATION_MS`] restate for the bindings.
//!
//! # Examples
//!
//! ```
//! use crosslock::limits;
//! assert_eq!(limits::PERMIT_DELTA.max, i64::from(i32::MAX));
//! assert!(limits::PERMIT_DELTA.check(1_i64 << 31, "the permits to add").is_err());
//! assert_eq!(limits::ALL.iter().filter(|l| l.name == "db").count(), 1);
//! ```

use crate::error::{Error, Result};

/// An inclusive range of whole numbers that one kind of argument accepts.
///
/// # Examples
///
/// ```
/// let l = crosslock::limits::LATCH_COUNT;
/// assert_eq!((l.min, l.max), (1, (1 << 53) - 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The key of this limit in the bindings' tables (`permits`, `permit_delta`, …).
    pub name: &'static str,
    /// The smallest value accepted.
    pub min: i64,
    /// The largest value accepted.
    pub max: i64,
    /// The bounds as a message shows them: `1..2^32-1`.
    pub shown: &'static str,
}

/// 2^53−1: the largest whole number a JavaScript number (and a Lua number in a script) holds
/// exactly.
const SAFE: i64 = (1 << 53) - 1;

/// A number of permits to take or give back: 1 .. 2^32−1.
///
/// ```
/// let l = crosslock::limits::PERMITS;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const PERMITS: Limit = Limit {
    name: "permits",
    min: 1,
    max: u32::MAX as i64,
    shown: "1..2^32-1",
};

/// A number of permits to set (`try_set_permits`), or to take where zero is allowed (a zero
/// acquire succeeds at once, as Redisson's): 0 .. 2^32−1.
///
/// ```
/// let l = crosslock::limits::PERMITS_SET;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const PERMITS_SET: Limit = Limit {
    name: "permits_set",
    min: 0,
    max: u32::MAX as i64,
    shown: "0..2^32-1",
};

/// The permits to add or remove (`add_permits`), within Redisson's `int`: −2^31 .. 2^31−1.
///
/// ```
/// let l = crosslock::limits::PERMIT_DELTA;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const PERMIT_DELTA: Limit = Limit {
    name: "permit_delta",
    min: i32::MIN as i64,
    max: i32::MAX as i64,
    shown: "-2^31..2^31-1",
};

/// A count-down latch's count: 1 .. 2^53−1.
///
/// ```
/// let l = crosslock::limits::LATCH_COUNT;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const LATCH_COUNT: Limit = Limit {
    name: "latch_count",
    min: 1,
    max: SAFE,
    shown: "1..2^53-1",
};

/// A database index in a URL: 0 .. 2^31−1 (Redis's `SELECT` takes a C `int`; the server's
/// `databases` setting, 16 by default, bounds it further).
///
/// ```
/// let l = crosslock::limits::DB;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const DB: Limit = Limit {
    name: "db",
    min: 0,
    max: i32::MAX as i64,
    shown: "0..2^31-1",
};

/// How many locks one renewal script renews (`watchdog_batch_size`): 1 .. 2^32−1.
///
/// ```
/// let l = crosslock::limits::WATCHDOG_BATCH;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const WATCHDOG_BATCH: Limit = Limit {
    name: "watchdog_batch",
    min: 1,
    max: u32::MAX as i64,
    shown: "1..2^32-1",
};

/// How many replicas must have each acquisition (`wait_for_replicas`): 1 .. 2^32−1.
///
/// ```
/// let l = crosslock::limits::REPLICAS;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const REPLICAS: Limit = Limit {
    name: "replicas",
    min: 1,
    max: u32::MAX as i64,
    shown: "1..2^32-1",
};

/// How many names one `scan` returns at most: 1 .. 2^32−1.
///
/// ```
/// let l = crosslock::limits::SCAN_LIMIT;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const SCAN_LIMIT: Limit = Limit {
    name: "scan_limit",
    min: 1,
    max: u32::MAX as i64,
    shown: "1..2^32-1",
};

/// A lease in whole milliseconds: 1 .. 2^53−1 (Redis counts leases in milliseconds).
///
/// ```
/// let l = crosslock::limits::LEASE_MS;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const LEASE_MS: Limit = Limit {
    name: "lease_ms",
    min: 1,
    max: SAFE,
    shown: "1..2^53-1",
};

/// Any other duration (a wait limit, a timeout) in milliseconds: 0 .. 2^53−1.
///
/// ```
/// let l = crosslock::limits::DURATION_MS;
/// assert!(l.contains(l.min.into()) && !l.contains(i128::from(l.max) + 1));
/// ```
pub const DURATION_MS: Limit = Limit {
    name: "duration_ms",
    min: 0,
    max: SAFE,
    shown: "0..2^53-1",
};

/// Every limit, for the bindings' tables.
///
/// ```
/// assert!(crosslock::limits::ALL.contains(&crosslock::limits::PERMITS));
/// ```
pub const ALL: &[Limit] = &[
    PERMITS,
    PERMITS_SET,
    PERMIT_DELTA,
    LATCH_COUNT,
    DB,
    WATCHDOG_BATCH,
    REPLICAS,
    SCAN_LIMIT,
    LEASE_MS,
    DURATION_MS,
];

impl Limit {
    /// Whether `value` is within the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(crosslock::limits::PERMITS.contains(1));
    /// assert!(!crosslock::limits::PERMITS.contains(0));
    /// ```
    pub fn contains(&self, value: i128) -> bool {
        i128::from(self.min) <= value && value <= i128::from(self.max)
    }

    /// `value`, or an [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) error
    /// naming `what` and the range.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when `value` is outside the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = crosslock::limits::PERMITS.check(0, "the permits of semaphore 's'").unwrap_err();
    /// assert_eq!(err.kind(), crosslock::ErrorKind::InvalidArgument);
    /// ```
    pub fn check(&self, value: impl Into<i128>, what: &str) -> Result<i64> {
        let value = value.into();
        if self.contains(value) {
            // Within an i64 range, so the conversion holds.
            Ok(value as i64)
        } else {
            Err(Error::invalid(format!(
                "{what} must be a whole number in {}, got {value}",
                self.shown
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_ranges_ordered() {
        for (i, l) in ALL.iter().enumerate() {
            assert!(l.min <= l.max, "{}", l.name);
            assert!(ALL[i + 1..].iter().all(|o| o.name != l.name), "{}", l.name);
        }
    }
}
