//! The locks of the RLock family (core's [`AnyLock`]) for the TypeScript layer, and
//! `CancelToken`.
//!
//! A lock has no native object of its own: the TypeScript `Lock` is plain JavaScript (its client,
//! kind and name), and every `lock*` method takes the kind and name and makes core's lock for
//! that call. A Node-API wrapped object per lock cost ~0.5 KB (the wrap's reference and weak
//! handle), and a numbered table entry per lock object, freed through a `FinalizationRegistry`,
//! still ~0.45 KB (the native lock, its slot, the registry's cell): more than a held lock's own
//! state, for a process that may hold tens of thousands. Making the lock per call costs a few
//! small allocations; a hold keeps its name and kind, from which core makes what renewing or
//! releasing it at `close()` needs (it keeps no lock of its own). Every method takes the
//! owner number explicitly: the TypeScript layer decides it (`lib/identity.ts`). Durations are
//! milliseconds.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Object};
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{AcquireOptions, AnyLock, CancellationToken, Owner, ffi};

use crate::client::{BackoffOptions, JsClient, backoff_of};
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

/// Makes the native `LockKind` enum from core's table of kinds (`crosslock::lock_kinds!`): its
/// numbers are core's `LockKind::code`, so TypeScript's kinds are core's.
macro_rules! js_lock_kind {
    ($($(#[$doc:meta])* $kind:ident = $code:literal, $name:literal, $phrase:literal;)*) => {
        /// A lock's kind, numbered as core numbers it (`crosslock::LockKind::code`): what every
        /// `lock*` method takes, with the lock's name.
        #[napi]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum LockKind {
            $($kind = $code,)*
        }

        impl From<LockKind> for crosslock::LockKind {
            fn from(kind: LockKind) -> Self {
                match kind {
                    $(LockKind::$kind => crosslock::LockKind::$kind,)*
                }
            }
        }

        impl From<crosslock::LockKind> for LockKind {
            fn from(kind: crosslock::LockKind) -> Self {
                match kind.code() {
                    $($code => LockKind::$kind,)*
                    _ => unreachable!("core's LockKind and this enum come from one table"),
                }
            }
        }
    };
}

crosslock::lock_kinds!(js_lock_kind);

impl JsClient {
    /// The core lock of kind `kind` named `name` (a spin lock with `backoff`, Redisson's by
    /// default), made for this call: cheap (no Redis call; a few small allocations). A hold it
    /// takes keeps only its name and kind, so the lock goes with the call.
    pub(crate) fn lock_from(
        &self,
        kind: LockKind,
        name: &str,
        backoff: Option<&BackoffOptions>,
    ) -> Result<Arc<dyn AnyLock>> {
        let backoff = match backoff {
            Some(b) => Some(backoff_of(name, b).map_err(|e| error::to_napi(&e))?),
            None => None,
        };
        ffi::lock_of(self.core(), kind.into(), name, backoff).map_err(|e| error::to_napi(&e))
    }
}

#[napi]
impl JsClient {
    /// The hash fields, sorted, of a group lock on `values` of `group` whose values the Java side
    /// encodes with `codec` (`"kryo5"` or `"string"`): the factory's check and the lock's key.
    #[napi]
    pub fn group_fields(
        &self,
        group: String,
        values: Vec<String>,
        codec: String,
    ) -> Result<Vec<String>> {
        crosslock::GroupCodec::from_name(&codec)
            .and_then(|codec| self.core().group_lock_with(&group, &values, codec))
            .map(|lock| lock.fields().to_vec())
            .map_err(|e| error::to_napi(&e))
    }

    /// Checks that a lock of kind `kind` named `name` (with `backoff`, for a spin lock) can be
    /// made: the factories' early error for a bad name or back-off.
    #[napi]
    pub fn check_lock(
        &self,
        kind: LockKind,
        name: String,
        backoff: Option<BackoffOptions>,
    ) -> Result<()> {
        self.lock_from(kind, &name, backoff.as_ref()).map(drop)
    }

    /// Acquires the lock of kind `kind` named `name` (with `backoff`, for a spin lock) for
    /// `owner`. `wait`: `null` waits as long as it takes, `0` tries once;
    /// `lease`: `null` means watchdog renewal. Resolves the fencing token when acquired (`0n` for
    /// kinds without one); when the wait limit passes, resolves `null`, or rejects with code
    /// `TIMEOUT` if `failOnTimeout`.
    #[napi(ts_return_type = "Promise<bigint | null>")]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's arguments, as they come
    pub fn lock_acquire<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
        backoff: Option<BackoffOptions>,
        owner: f64,
        wait: Option<f64>,
        lease: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_from(kind, &name, backoff.as_ref())?;
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
        runtime::promise(env, async move {
            let acquired = ffi::acquire(&lock, owner, &options, fail_on_timeout).await?;
            Ok(acquired.map(|a| BigInt::from(a.token.unwrap_or(0))))
        })
    }

    /// Releases one hold of `owner` on the lock; resolves `true` when that fully released the
    /// lock. Rejects with `NOT_HELD` (Redis unchanged) or `LOCK_LOST`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_release<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
        owner: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { lock.release_as(owner).await })
    }

    /// Sets the lease of the hold of `owner` on the lock to `lease` ms from now. Rejects with
    /// `NOT_HELD` (Redis unchanged), `LOCK_LOST` or `INVALID_ARGUMENT`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn lock_extend<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
        owner: f64,
        lease: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_from(kind, &name, None)?;
        let what = format!("the lease an extend of lock '{name}' sets");
        let lease = ffi::duration(lease, 0.001, &what).map_err(|e| error::to_napi(&e))?;
        runtime::promise(env, async move { lock.extend_as(owner, lease).await })
    }

    /// Deletes the lock whoever holds it; resolves `true` if it was locked.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_force_unlock<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
    ) -> Result<Object<'env>> {
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { lock.force_unlock().await })
    }

    /// Whether anyone holds the lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_is_locked<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
    ) -> Result<Object<'env>> {
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { lock.is_locked().await })
    }

    /// Whether `owner` of this client holds the lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_is_held_by<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
        owner: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { Ok(lock.hold_count_of(owner).await? > 0) })
    }

    /// How many times `owner` of this client holds the lock.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn lock_hold_count_of<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
        owner: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { lock.hold_count_of(owner).await })
    }

    /// Milliseconds before the lock expires: `null` when it is not locked, `Infinity` when its
    /// key has no expiry.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn lock_remaining_lease<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
    ) -> Result<Object<'env>> {
        let lock = self.lock_from(kind, &name, None)?;
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

    /// The current holders' strings (`<client-uuid>:<n>`) of the lock.
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn lock_holders<'env>(
        &self,
        env: &'env Env,
        kind: LockKind,
        name: String,
    ) -> Result<Object<'env>> {
        let lock = self.lock_from(kind, &name, None)?;
        runtime::promise(env, async move { lock.holders_now().await })
    }

    /// Whether this process found the hold of `owner` on the lock lost (and it was not released
    /// since).
    #[napi]
    pub fn lock_is_lost(&self, kind: LockKind, name: String, owner: f64) -> Result<bool> {
        Ok(self
            .lock_from(kind, &name, None)?
            .is_lost(self::owner(owner)?))
    }
}
