//! The native `CountDownLatch` (core's count-down latch). Durations are milliseconds; a
//! `CancelToken` cancels a wait.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::CountDownLatch;

use crate::error;
use crate::lock::JsCancelToken;
use crate::runtime;
use crate::unowned::options;

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
