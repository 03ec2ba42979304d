//! The native `MultiLock` over native locks: core's one `MultiLock`, of all the parts or
//! (`red`) a majority (`MultiLock::majority`, what a `RedLock` is).

use napi::bindgen_prelude::{ClassInstance, Object};
use napi::{Env, Result};
use napi_derive::napi;

use crosslock::{AcquireOptions, MultiLock, Owner, ffi};

use crate::client::{BackoffOptions, JsClient};
use crate::error;
use crate::lock::{JsCancelToken, owner};
use crate::runtime;

/// What an acquire resolves to: the validity (ms, with a lease) and the parts held.
#[napi(object)]
pub struct MultiHeld {
    /// `lease − time to acquire − clock drift`, in ms, when a lease was given.
    pub validity: Option<f64>,
    /// The names of the parts held.
    pub parts: Vec<String>,
}

/// All of several locks, or (`red`) a majority of them.
#[napi(js_name = "MultiLock")]
pub struct JsMultiLock {
    inner: MultiLock,
    label: String,
}

#[napi]
impl JsMultiLock {
    /// A multi-lock over the locks of kind `kinds[i]` named `names[i]` (a spin lock with
    /// `backoffs[i]`) in `clients[i]`, in order; a red lock (a majority) if `red`.
    #[napi(constructor)]
    pub fn new(
        clients: Vec<ClassInstance<'_, JsClient>>,
        kinds: Vec<crate::lock::LockKind>,
        names: Vec<String>,
        backoffs: Vec<Option<BackoffOptions>>,
        red: bool,
    ) -> Result<Self> {
        if clients.len() != kinds.len()
            || clients.len() != names.len()
            || clients.len() != backoffs.len()
        {
            return Err(error::invalid_argument(format!(
                "a multi-lock takes one client, kind, name and back-off per lock, got {} clients, \
                 {} kinds, {} names and {} back-offs",
                clients.len(),
                kinds.len(),
                names.len(),
                backoffs.len()
            )));
        }
        let parts = clients
            .iter()
            .zip(kinds.iter().zip(names.iter().zip(&backoffs)))
            .map(|(client, (kind, (name, backoff)))| {
                client.lock_from(*kind, name, backoff.as_ref())
            })
            .collect::<Result<Vec<_>>>()?;
        let label = parts
            .iter()
            .map(|l| format!("'{}'", l.name()))
            .collect::<Vec<_>>()
            .join(", ");
        let inner = if red {
            MultiLock::majority(parts)
        } else {
            MultiLock::new(parts)
        };
        Ok(JsMultiLock {
            inner: inner.map_err(|e| error::to_napi(&e))?,
            label,
        })
    }

    /// Acquires for `owner`: resolves what it holds, or `null` when `wait` passed (rejects with
    /// `TIMEOUT` if `failOnTimeout`).
    #[napi(ts_return_type = "Promise<MultiHeld | null>")]
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
        let mut options = AcquireOptions::new();
        let what = format!("the multi-lock of {}", self.label);
        if let Some(ms) = wait {
            options = options.wait(
                ffi::duration(ms, 0.001, &format!("the wait for {what}"))
                    .map_err(|e| error::to_napi(&e))?,
            );
        }
        if let Some(ms) = lease {
            options = options.lease(
                ffi::lease(ms, 0.001, &format!("the lease of {what}"))
                    .map_err(|e| error::to_napi(&e))?,
            );
        }
        if let Some(cancel) = cancel {
            options = options.cancel(cancel.token.clone());
        }
        let inner = self.inner.clone();
        runtime::promise(env, async move {
            match inner.acquire_as(owner, &options).await? {
                Some((validity, parts)) => Ok(Some(MultiHeld {
                    validity: validity.map(|v| v.as_secs_f64() * 1000.0),
                    parts,
                })),
                None if fail_on_timeout => {
                    let waited = options.wait.unwrap_or_default();
                    Err(ffi::timeout(
                        format!(
                            "gave up waiting for {what} after {:.3}s; nothing is held",
                            waited.as_secs_f64()
                        ),
                        waited,
                    ))
                }
                None => Ok(None),
            }
        })
    }

    /// Releases every part `owner` holds.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, owner: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let inner = self.inner.clone();
        runtime::promise(env, async move { inner.release_as(owner).await })
    }

    /// Sets the lease of every part `owner` holds to `lease` ms from now; resolves the validity
    /// (ms).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn extend<'env>(&self, env: &'env Env, owner: f64, lease: f64) -> Result<Object<'env>> {
        let owner = self::owner(owner)?;
        let lease = ffi::duration(lease, 0.001, "the lease an extend of the multi-lock sets")
            .map_err(|e| error::to_napi(&e))?;
        let inner = self.inner.clone();
        runtime::promise(env, async move {
            let validity = inner.extend_as(owner, lease).await?;
            Ok(validity.as_secs_f64() * 1000.0)
        })
    }

    /// Whether the acquisition of `owner` may be lost.
    #[napi]
    pub fn is_lost(&self, owner: f64) -> Result<bool> {
        let owner: Owner = self::owner(owner)?;
        Ok(self.inner.is_lost(owner))
    }
}
