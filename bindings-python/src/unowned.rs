//! What the owner-less synchronizers' classes (`semaphore.rs`, `permit_expirable_semaphore.rs`,
//! `count_down_latch.rs`) share: their call options and durations as Python sees them. Durations
//! are seconds as floats (`None` = no limit).

use std::time::Duration;

use crosslock::{AcquireOptions, ffi};

/// The wait limit (and lease) of a call, validated by core's rules, naming `name`.
pub(crate) fn options(
    name: &str,
    what: &str,
    wait: Option<f64>,
    lease: Option<f64>,
) -> crosslock::Result<AcquireOptions> {
    let mut options = AcquireOptions::new();
    if let Some(wait) = wait {
        options = options.wait(ffi::duration(
            wait,
            1.0,
            &format!("the timeout for {what} '{name}'"),
        )?);
    }
    if let Some(lease) = lease {
        options = options.lease(ffi::lease(
            lease,
            1.0,
            &format!("the lease of a permit of {what} '{name}'"),
        )?);
    }
    Ok(options)
}

/// Seconds as Python sees them: `Duration::MAX` (no expiry) becomes `inf`.
pub(crate) fn seconds(d: Option<Duration>) -> Option<f64> {
    d.map(|d| {
        if d == Duration::MAX {
            f64::INFINITY
        } else {
            d.as_secs_f64()
        }
    })
}
