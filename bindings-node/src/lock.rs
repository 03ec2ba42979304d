//! The native `Lock` (any lock of the RLock family: core's [`AnyLock`]) and `CancelToken`.
//!
//! One native class serves every lock type; the client's factories hand out the type-erased
//! lock and the TypeScript layer wraps it in the type's own class (`lib/lockable.ts` and the
//! per-type files). Every method takes the owner number explicitly: the TypeScript layer decides
//! it (`lib/identity.ts`). Durations are milliseconds.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Object};
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{AcquireOptions, AnyLock, CancellationToken, Owner, ffi};

use crate::error;
use crate::runtime;

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Converts an owner number from JavaScript, which must be a safe non-negative integer.
pub(crate) fn owner(n: f64) -> Result<Owner> {
    if !((0.0..=MAX_SAFE_INTEGER).contains(&n) && n.fract() == 0.0) {
        return Err(error::invalid_argument(format!(
            "an owner must be a non-negative safe integer, got {n}"
        )));
    }
    Ok(Owner::new(n as u64))
}

/// Cancels a waiting acquire it was passed to (the TypeScript layer cancels it when the caller's
/// `AbortSignal` aborts).
#[napi(js_name = "CancelToken")]
pub struct JsCancelToken {
    pub(crate) token: CancellationToken,
}

#[napi]
impl JsCancelToken {
    /// A token not cancelled yet.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        JsCancelToken {
            token: CancellationToken::new(),
        }
    }

    /// Cancels every acquire this token was passed to; they reject with code `CANCELLED` after
    /// giving back anything they took.
    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Whether `cancel()` was called.
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

/// A lock of any kind of the RLock family (see core's `AnyLock`). Made by the client's factories.
#[napi(js_name = "Lock")]
pub struct JsLock {
    pub(crate) inner: Arc<dyn AnyLock>,
}

impl JsLock {
    pub(crate) fn new(inner: Arc<dyn AnyLock>) -> Self {
        JsLock { inner }
    }
}

#[napi]
impl JsLock {
    /// The lock's name: its key in Redis.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The kind of lock: `'lock'`, `'fair_lock'`, `'spin_lock'`, `'fenced_lock'`,
    /// `'non_reentrant_lock'`, `'read_lock'` or `'write_lock'`.
    #[napi(getter)]
    pub fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// Acquires for `owner`. `wait`: `null` waits as long as it takes, `0` tries once; `lease`:
    /// `null` means watchdog renewal. Resolves the fencing token when acquired (`0n` for kinds
    /// without one); when the wait limit passes, resolves `null`, or rejects with code `TIMEOUT`
    /// if `failOnTimeout`.
    #[napi(ts_return_type = "Promise<bigint | null>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        owner: f64,
        wait: Option<f64>,
        lease: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let name = self.inner.name();
        let mut options = AcquireOptions::new().owner(owner);
        if let Some(ms) = wait {
            let what = format!("the wait for lock '{name}'");
            options =
                options.wait(ffi::duration(ms, 0.001, &what).map_err(|e| error::to_napi(&e))?);
        }
        if let Some(ms) = lease {
            let what = format!("the lease of lock '{name}'");
            options = options.lease(ffi::lease(ms, 0.001, &what).map_err(|e| error::to_napi(&e))?);
        }
        if let Some(cancel) = cancel {
            options = options.cancel(cancel.token.clone());
        }
        let lock = self.inner.clone();
        runtime::promise(env, async move {
            let acquired = ffi::acquire(&lock, owner, &options, fail_on_timeout).await?;
            Ok(acquired.map(|a| BigInt::from(a.token.unwrap_or(0))))
        })
    }

    /// Releases one hold of `owner`; resolves `true` when that fully released the lock. Rejects
    /// with `NOT_HELD` (Redis unchanged) or `LOCK_LOST`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env, owner: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.inner.clone();
        runtime::promise(env, async move { lock.release_as(owner).await })
    }

    /// Deletes the lock whoever holds it; resolves `true` if it was locked.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn force_unlock<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let lock = self.inner.clone();
        runtime::promise(env, async move { lock.force_unlock().await })
    }

    /// Whether anyone holds the lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let lock = self.inner.clone();
        runtime::promise(env, async move { lock.is_locked().await })
    }

    /// Whether `owner` of this client holds the lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_held_by<'env>(&self, env: &'env Env, owner: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.inner.clone();
        runtime::promise(env, async move { Ok(lock.hold_count_of(owner).await? > 0) })
    }

    /// How many times `owner` of this client holds the lock.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn hold_count_of<'env>(&self, env: &'env Env, owner: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.inner.clone();
        runtime::promise(env, async move { lock.hold_count_of(owner).await })
    }

    /// Milliseconds before the lock expires: `null` when it is not locked, `Infinity` when its
    /// key has no expiry.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn remaining_lease<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let lock = self.inner.clone();
        runtime::promise(env, async move {
            Ok(lock.remaining_lease().await?.map(|d| {
                if d == std::time::Duration::MAX {
                    f64::INFINITY
                } else {
                    d.as_secs_f64() * 1000.0
                }
            }))
        })
    }

    /// The current holders' strings (`<client-uuid>:<n>`).
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn holders<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let lock = self.inner.clone();
        runtime::promise(env, async move { lock.holders_now().await })
    }

    /// Whether this process found the hold of `owner` lost (and it was not released since).
    #[napi]
    pub fn is_lost(&self, owner: f64) -> Result<bool> {
        Ok(self.inner.is_lost(self::owner(owner)?))
    }
}
