//! What the owner-less synchronizers' classes (`semaphore.rs`, `permit_expirable_semaphore.rs`,
//! `count_down_latch.rs`) share: their call options and permit counts. Durations are
//! milliseconds.

use napi::Result;

use crosslock::{AcquireOptions, ffi};

use crate::error;
use crate::lock::JsCancelToken;

/// A wait's options, validated by core's rules, naming `name` (milliseconds; `cancel` cancels it).
pub(crate) fn options(
    name: &str,
    wait: Option<f64>,
    lease: Option<f64>,
    cancel: Option<&JsCancelToken>,
) -> Result<AcquireOptions> {
    let mut options = AcquireOptions::new();
    if let Some(ms) = wait {
        options = options.wait(
            ffi::duration(ms, 0.001, &format!("the wait for '{name}'"))
                .map_err(|e| error::to_napi(&e))?,
        );
    }
    if let Some(ms) = lease {
        options = options.lease(
            ffi::lease(ms, 0.001, &format!("the lease of a permit of '{name}'"))
                .map_err(|e| error::to_napi(&e))?,
        );
    }
    if let Some(cancel) = cancel {
        options = options.cancel(cancel.token.clone());
    }
    Ok(options)
}

/// A count of permits from JavaScript: a whole number in 0..2^32-1.
pub(crate) fn permits(n: f64, name: &str) -> Result<u32> {
    if !(0.0..=f64::from(u32::MAX)).contains(&n) || n.fract() != 0.0 {
        return Err(error::invalid_argument(format!(
            "the permits of semaphore '{name}' must be a whole number in 0..2^32-1, got {n}"
        )));
    }
    Ok(n as u32)
}
