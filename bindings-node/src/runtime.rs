//! Promises over crosslock's runtime, and the per-environment clean-up.
//!
//! No napi runtime is ever started: a call creates a deferred promise on the JavaScript thread,
//! spawns its work on crosslock's one process runtime ([`crosslock::runtime::spawn`]) and settles
//! the promise from there. napi-rs queues the settlement back to the JavaScript thread, and drops
//! it if that thread's environment (a terminated worker) is gone by then.
//!
//! Every environment (the main thread and each `worker_thread`) keeps a registry of the clients it
//! connected. Its clean-up hook, run when the environment exits, closes them all: core's `close()`
//! cancels their pending acquires and releases the locks they hold, so terminating a worker
//! leaves no lock and no waiter behind.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, JsDeferred};

use crate::error;

type Resolver<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

/// Settles a deferred exactly once: with `resolve`/`reject`, or, if the task is dropped without
/// either (it panicked), with an internal error, so no promise is left pending forever.
struct Settle<T: ToNapiValue + 'static>(Option<JsDeferred<T, Resolver<T>>>);

impl<T: ToNapiValue + 'static> Settle<T> {
    fn resolve(mut self, resolver: Resolver<T>) {
        if let Some(deferred) = self.0.take() {
            deferred.resolve(resolver);
        }
    }

    fn reject(mut self, err: napi::Error) {
        if let Some(deferred) = self.0.take() {
            deferred.reject(err);
        }
    }
}

impl<T: ToNapiValue + 'static> Drop for Settle<T> {
    fn drop(&mut self) {
        if let Some(deferred) = self.0.take() {
            deferred.reject(error::internal(
                "crosslock: an operation ended abnormally (a panic in the native module); \
                 please report it",
            ));
        }
    }
}

/// Runs `work` on crosslock's runtime and returns a promise of its result.
pub(crate) fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    F: Future<Output = crosslock::Result<T>> + Send + 'static,
    T: ToNapiValue + Send + 'static,
{
    promise_with(env, work, |_, value| Ok(value))
}

/// Runs `work` on crosslock's runtime; `finish` turns its value into the promise's value on the
/// JavaScript thread (where it may use `env`).
pub(crate) fn promise_with<'env, T, R, F, G>(
    env: &'env Env,
    work: F,
    finish: G,
) -> napi::Result<Object<'env>>
where
    F: Future<Output = crosslock::Result<T>> + Send + 'static,
    T: Send + 'static,
    R: ToNapiValue + 'static,
    G: FnOnce(Env, T) -> napi::Result<R> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<R, Resolver<R>>()?;
    let settle = Settle(Some(deferred));
    crosslock::runtime::spawn(async move {
        match work.await {
            Ok(value) => settle.resolve(Box::new(move |env| finish(env, value))),
            Err(err) => settle.reject(error::to_napi(&err)),
        }
    });
    Ok(promise)
}

/// The clients one environment connected, closed by its clean-up hook.
type Clients = Arc<Mutex<HashMap<u64, crosslock::Client>>>;

/// The environment's instance data.
struct EnvState {
    clients: Clients,
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn env_clients(env: &Env) -> napi::Result<Clients> {
    if let Some(state) = env.get_instance_data::<EnvState>()? {
        return Ok(state.clients.clone());
    }
    let clients: Clients = Arc::default();
    env.set_instance_data(
        EnvState {
            clients: clients.clone(),
        },
        (),
        |_| {},
    )?;
    env.add_env_cleanup_hook(clients.clone(), close_all)?;
    Ok(clients)
}

/// Records `client` as belonging to `env`; returns the key to [`forget`] it with.
pub(crate) fn register(env: &Env, client: crosslock::Client) -> napi::Result<u64> {
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    env_clients(env)?
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, client);
    Ok(key)
}

/// Stops tracking a client (it is being closed by the program).
pub(crate) fn forget(env: &Env, key: u64) {
    if let Ok(Some(state)) = env.get_instance_data::<EnvState>() {
        state
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }
}

/// The clean-up hook: the environment is exiting (a worker terminated, or the process ends).
///
/// Closes every client it still has, waiting on this thread (never a runtime thread) until each
/// close is done; core bounds each by the client's response timeout.
fn close_all(clients: Clients) {
    let clients: Vec<_> = clients
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, c)| c)
        .collect();
    if clients.is_empty() {
        return;
    }
    let closing: Vec<_> = clients
        .into_iter()
        .map(|client| crosslock::runtime::spawn(async move { client.close().await }))
        .collect();
    crosslock::runtime::block_on(async move {
        for handle in closing {
            let _ = handle.await;
        }
    });
}
