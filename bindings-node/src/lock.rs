//! The locks of the RLock family (core's [`AnyLock`]) as the client's numbered table, and
//! `CancelToken`.
//!
//! A lock is not a native object of its own: a Node-API wrapped object costs ~0.5 KB of memory
//! (the wrap's reference and weak handle, napi-rs's bookkeeping), more than the lock itself, and a
//! process may hold tens of thousands. The client's factories put the type-erased lock in the
//! client's [`LockTable`] and return its number; the TypeScript layer (`lib/lockable.ts`) keeps
//! the number with the name, calls the client's `lock*` methods with it, and drops the
//! entry (`dropLock`) through a `FinalizationRegistry` once its object is collected. Every method
//! takes the owner number explicitly: the TypeScript layer decides it (`lib/identity.ts`).
//! Durations are milliseconds.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Object};
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{AcquireOptions, AnyLock, CancellationToken, Owner, ffi};

use crate::client::JsClient;
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

/// The client's locks, by number: a slot per live JavaScript lock object, reused once that object
/// is collected.
#[derive(Default)]
pub(crate) struct LockTable {
    slots: Vec<Option<Arc<dyn AnyLock>>>,
    free: Vec<u32>,
}

impl LockTable {
    /// Stores `lock`; its number.
    fn insert(&mut self, lock: Arc<dyn AnyLock>) -> u32 {
        if let Some(id) = self.free.pop() {
            self.slots[id as usize] = Some(lock);
            return id;
        }
        self.slots.push(Some(lock));
        (self.slots.len() - 1) as u32
    }

    fn get(&self, id: u32) -> Option<&Arc<dyn AnyLock>> {
        self.slots.get(id as usize)?.as_ref()
    }

    fn remove(&mut self, id: u32) {
        if let Some(slot) = self.slots.get_mut(id as usize)
            && slot.take().is_some()
        {
            self.free.push(id);
        }
    }
}

impl JsClient {
    /// The lock numbered `id`.
    pub(crate) fn lock_of(&self, id: u32) -> Result<Arc<dyn AnyLock>> {
        let table = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        table.get(id).cloned().ok_or_else(|| {
            error::invalid_argument(format!(
                "no lock numbered {id} in this client: lock objects come from the client's \
                 factories (client.lock(name), …)"
            ))
        })
    }

    /// Stores `lock` in the table; its number.
    pub(crate) fn add_lock(&self, lock: Arc<dyn AnyLock>) -> u32 {
        let mut table = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        table.insert(lock)
    }
}

#[napi]
impl JsClient {
    /// How many lock objects of this client are alive (entries in its lock table).
    #[napi]
    pub fn live_locks(&self) -> u32 {
        let table = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        (table.slots.len() - table.free.len()) as u32
    }

    /// Forgets lock `id` (its JavaScript object was collected); holds it took stay held.
    #[napi]
    pub fn drop_lock(&self, id: u32) {
        let mut table = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        table.remove(id);
    }

    /// Acquires lock `id` for `owner`. `wait`: `null` waits as long as it takes, `0` tries once;
    /// `lease`: `null` means watchdog renewal. Resolves the fencing token when acquired (`0n` for
    /// kinds without one); when the wait limit passes, resolves `null`, or rejects with code
    /// `TIMEOUT` if `failOnTimeout`.
    #[napi(ts_return_type = "Promise<bigint | null>")]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's arguments, as they come
    pub fn lock_acquire<'env>(
        &self,
        env: &'env Env,
        id: u32,
        owner: f64,
        wait: Option<f64>,
        lease: Option<f64>,
        cancel: Option<&JsCancelToken>,
        fail_on_timeout: bool,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_of(id)?;
        let name = lock.name();
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

    /// Releases one hold of `owner` on lock `id`; resolves `true` when that fully released the
    /// lock. Rejects with `NOT_HELD` (Redis unchanged) or `LOCK_LOST`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_release<'env>(&self, env: &'env Env, id: u32, owner: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { lock.release_as(owner).await })
    }

    /// Deletes lock `id` whoever holds it; resolves `true` if it was locked.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_force_unlock<'env>(&self, env: &'env Env, id: u32) -> Result<Object<'env>> {
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { lock.force_unlock().await })
    }

    /// Whether anyone holds lock `id`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_is_locked<'env>(&self, env: &'env Env, id: u32) -> Result<Object<'env>> {
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { lock.is_locked().await })
    }

    /// Whether `owner` of this client holds lock `id`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn lock_is_held_by<'env>(
        &self,
        env: &'env Env,
        id: u32,
        owner: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { Ok(lock.hold_count_of(owner).await? > 0) })
    }

    /// How many times `owner` of this client holds lock `id`.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn lock_hold_count_of<'env>(
        &self,
        env: &'env Env,
        id: u32,
        owner: f64,
    ) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { lock.hold_count_of(owner).await })
    }

    /// Milliseconds before lock `id` expires: `null` when it is not locked, `Infinity` when its
    /// key has no expiry.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn lock_remaining_lease<'env>(&self, env: &'env Env, id: u32) -> Result<Object<'env>> {
        let lock = self.lock_of(id)?;
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

    /// The current holders' strings (`<client-uuid>:<n>`) of lock `id`.
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn lock_holders<'env>(&self, env: &'env Env, id: u32) -> Result<Object<'env>> {
        let lock = self.lock_of(id)?;
        runtime::promise(env, async move { lock.holders_now().await })
    }

    /// Whether this process found the hold of `owner` on lock `id` lost (and it was not released
    /// since).
    #[napi]
    pub fn lock_is_lost(&self, id: u32, owner: f64) -> Result<bool> {
        Ok(self.lock_of(id)?.is_lost(self::owner(owner)?))
    }
}
