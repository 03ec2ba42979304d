//! The native `PermitExpirableSemaphore` (core's semaphore of permits with ids and leases).
//! Durations are milliseconds; a `CancelToken` cancels a wait.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{PermitExpirableSemaphore, ffi};

use crate::error;
use crate::lock::JsCancelToken;
use crate::runtime;
use crate::unowned::{options, permits};

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
