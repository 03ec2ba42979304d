//! The native `Semaphore` (core's counting semaphore). Durations are milliseconds; a
//! `CancelToken` cancels a wait.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::Semaphore;

use crate::lock::JsCancelToken;
use crate::runtime;
use crate::unowned::{options, permits};

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
