//! The native `Semaphore`, `PermitExpirableSemaphore` and `CountDownLatch` (core's owner-less
//! synchronizers). Durations are milliseconds; a `CancelToken` cancels a wait.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{AcquireOptions, CountDownLatch, PermitExpirableSemaphore, Semaphore, ffi};

use crate::error;
use crate::lock::JsCancelToken;
use crate::runtime;

fn options(
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

fn permits(n: f64, name: &str) -> Result<u32> {
    if !(0.0..=f64::from(u32::MAX)).contains(&n) || n.fract() != 0.0 {
        return Err(error::invalid_argument(format!(
            "the permits of semaphore '{name}' must be a whole number in 0..2^32-1, got {n}"
        )));
    }
    Ok(n as u32)
}

/// A counting semaphore (see core's `Semaphore`). Made by `Client.semaphore()`.
#[napi(js_name = "Semaphore")]
pub struct JsSemaphore {
    inner: Semaphore,
}

impl JsSemaphore {
    pub(crate) fn new(inner: Semaphore) -> Self {
        JsSemaphore { inner }
    }
}

#[napi]
impl JsSemaphore {
    /// The semaphore's name: its key in Redis.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Takes `permits`: resolves whether they were taken within `wait` (`null`: no limit), or
    /// rejects with `TIMEOUT` if `failOnTimeout`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        permits: f64,
        wait: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let n = self::permits(permits, self.inner.name())?;
        let options = options(self.inner.name(), wait, None, cancel)?;
        let sem = self.inner.clone();
        runtime::promise(env, async move {
            let limit = options.wait;
            let taken = sem.take(n, options).await?;
            if !taken && fail_on_timeout {
                return Err(sem.timeout_error(n, limit.unwrap_or_default()).await);
            }
            Ok(taken)
        })
    }

    /// Gives `permits` back.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, permits: f64) -> Result<Object<'env>> {
        let n = self::permits(permits, self.inner.name())?;
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.release(n).await })
    }

    /// Gives `permits` back only if the semaphore exists (Redisson's `releaseIfExists`);
    /// resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release_if_exists<'env>(&self, env: &'env Env, permits: f64) -> Result<Object<'env>> {
        let n = self::permits(permits, self.inner.name())?;
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.release_if_exists(n).await })
    }

    /// Sets the permits if none are set; resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn try_set_permits<'env>(&self, env: &'env Env, permits: f64) -> Result<Object<'env>> {
        let n = self::permits(permits, self.inner.name())?;
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.try_set_permits(n).await })
    }

    /// Adds (negative: removes) permits; resolves the new count.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn add_permits<'env>(&self, env: &'env Env, permits: i64) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.add_permits(permits).await })
    }

    /// The permits available now.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn available_permits<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.available_permits().await })
    }

    /// Takes every available permit; resolves how many.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn drain_permits<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.drain_permits().await })
    }

    /// Deletes the counter; resolves whether it existed.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.delete().await })
    }
}

/// A semaphore of permits with ids and leases (see core's `PermitExpirableSemaphore`).
#[napi(js_name = "PermitExpirableSemaphore")]
pub struct JsPermitExpirableSemaphore {
    inner: PermitExpirableSemaphore,
}

impl JsPermitExpirableSemaphore {
    pub(crate) fn new(inner: PermitExpirableSemaphore) -> Self {
        JsPermitExpirableSemaphore { inner }
    }
}

#[napi]
impl JsPermitExpirableSemaphore {
    /// The semaphore's name: its key in Redis.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Takes a permit: resolves its id, or `null` when `wait` passed (rejects with `TIMEOUT` if
    /// `failOnTimeout`). `lease` (ms): `null` keeps it with the watchdog.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        wait: Option<f64>,
        lease: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let options = options(self.inner.name(), wait, lease, cancel)?;
        let sem = self.inner.clone();
        runtime::promise(env, async move {
            let limit = options.wait;
            match sem.try_acquire(options).await? {
                Some(permit) => Ok(Some(permit.detach())),
                None if fail_on_timeout => Err(sem.timeout_error(limit.unwrap_or_default()).await),
                None => Ok(None),
            }
        })
    }

    /// Releases permit `id`; rejects with `NOT_HELD` (no such permit) or `LOCK_LOST` (expired).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, id: String) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.release(&id).await })
    }

    /// Releases permit `id`; resolves whether it was there and unexpired.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn try_release<'env>(&self, env: &'env Env, id: String) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.try_release(&id).await })
    }

    /// Makes permit `id` expire `lease` ms from now; resolves whether it exists.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn update_lease<'env>(
        &self,
        env: &'env Env,
        id: String,
        lease: f64,
    ) -> Result<Object<'env>> {
        let lease = ffi::lease(
            lease,
            0.001,
            &format!("the lease of a permit of '{}'", self.inner.name()),
        )
        .map_err(|e| error::to_napi(&e))?;
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.update_lease(&id, lease).await })
    }

    /// Milliseconds before permit `id` expires: `null` if there is no such permit, `Infinity` if
    /// it never does.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn remaining_lease<'env>(&self, env: &'env Env, id: String) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move {
            Ok(sem.remaining_lease(&id).await?.map(|d| {
                if d == std::time::Duration::MAX {
                    f64::INFINITY
                } else {
                    d.as_secs_f64() * 1000.0
                }
            }))
        })
    }

    /// Sets the permits if none are set; resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn try_set_permits<'env>(&self, env: &'env Env, permits: f64) -> Result<Object<'env>> {
        let n = self::permits(permits, self.inner.name())?;
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.try_set_permits(n).await })
    }

    /// Adds (negative: removes) permits; resolves the new count.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn add_permits<'env>(&self, env: &'env Env, permits: i64) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.add_permits(permits).await })
    }

    /// The permits available now (expired ones counted back first).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn available_permits<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let sem = self.inner.clone();
        runtime::promise(env, async move { sem.available_permits().await })
    }

    /// Whether this client found permit `id` lost (and it was not released since).
    #[napi]
    pub fn is_lost(&self, id: String) -> bool {
        self.inner.is_lost(&id)
    }
}

/// A count-down latch (see core's `CountDownLatch`).
#[napi(js_name = "CountDownLatch")]
pub struct JsCountDownLatch {
    inner: CountDownLatch,
}

impl JsCountDownLatch {
    pub(crate) fn new(inner: CountDownLatch) -> Self {
        JsCountDownLatch { inner }
    }
}

#[napi]
impl JsCountDownLatch {
    /// The latch's name: its key in Redis.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Sets the count unless the latch is counting; resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn try_set_count<'env>(&self, env: &'env Env, count: f64) -> Result<Object<'env>> {
        if !(1.0..=9_007_199_254_740_991.0).contains(&count) || count.fract() != 0.0 {
            return Err(error::invalid_argument(format!(
                "the count of latch '{}' must be a whole number ≥ 1, got {count}",
                self.inner.name()
            )));
        }
        let latch = self.inner.clone();
        runtime::promise(env, async move { latch.try_set_count(count as u64).await })
    }

    /// Counts down by one; resolves the count left.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count_down<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let latch = self.inner.clone();
        runtime::promise(env, async move { Ok(latch.count_down().await? as f64) })
    }

    /// The count now.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let latch = self.inner.clone();
        runtime::promise(env, async move { Ok(latch.count().await? as f64) })
    }

    /// Waits for zero within `wait` ms (`null`: no limit): resolves whether it opened, or rejects
    /// with `TIMEOUT` if `failOnTimeout`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn wait<'env>(
        &self,
        env: &'env Env,
        wait: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let options = options(self.inner.name(), wait, None, cancel)?;
        let latch = self.inner.clone();
        runtime::promise(env, async move {
            if fail_on_timeout {
                return latch.wait_with(options).await.map(|_| true);
            }
            latch.open_within(options).await
        })
    }

    /// Deletes the latch; resolves whether it existed.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let latch = self.inner.clone();
        runtime::promise(env, async move { latch.delete().await })
    }
}
