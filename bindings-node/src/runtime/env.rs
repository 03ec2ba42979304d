//! Each environment's state (its queue, its event loop, its pending promises) and its registry
//! of clients, closed by its clean-up hook when it exits.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use napi::{Env, JsValue, sys};

use super::nudge::{Pace, Paced};
use super::queue::{Queue, Tsfn, close_queue, run_completion};
use super::thread::thread_event_loop;
use super::uv::uv_event_loop;
use crate::error;

/// The clients one environment connected, closed by its clean-up hook.
type Clients = Arc<Mutex<HashMap<u64, crosslock::Client>>>;

/// The environment's instance data (used on its JavaScript thread only).
pub(super) struct EnvState {
    pub(super) clients: Clients,
    pub(super) queue: Arc<Queue>,
    /// Core's view of this thread's libuv loop: the lanes its calls make their round trips on.
    pub(super) event_loop: Arc<crosslock::host::EventLoop>,
    /// Promises created and not yet settled; the queue keeps the event loop alive while > 0.
    pub(super) pending: usize,
}

impl EnvState {
    /// A promise was created: keep the loop alive until it settles.
    pub(super) fn started(&mut self, env: &Env) {
        self.pending += 1;
        if self.pending == 1 {
            self.queue.hold_loop(env, true);
        }
    }

    /// A promise was settled.
    pub(super) fn settled(&mut self, env: &Env) {
        self.pending = self.pending.saturating_sub(1);
        if self.pending == 0 {
            self.queue.hold_loop(env, false);
        }
    }
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

pub(super) fn env_state(env: &Env) -> napi::Result<&'static mut EnvState> {
    if let Some(state) = env.get_instance_data::<EnvState>()? {
        return Ok(state);
    }
    let raw_env = env.raw();
    let mut tsfn = ptr::null_mut();
    let name = env.create_string("crosslock")?;
    // SAFETY: on the JavaScript thread; no JavaScript function (the call-back does the work), an
    // unbounded queue and one thread (ours, released by `close_queue`).
    let status = unsafe {
        sys::napi_create_threadsafe_function(
            raw_env,
            ptr::null_mut(),
            ptr::null_mut(),
            name.raw(),
            0,
            1,
            ptr::null_mut(),
            None,
            ptr::null_mut(),
            Some(run_completion),
            &mut tsfn,
        )
    };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot create its completion queue",
        ));
    }
    // SAFETY: as above; idle until a promise is pending.
    unsafe { sys::napi_unref_threadsafe_function(raw_env, tsfn) };
    let libuv = super::uv::libuv();
    let queue = Arc::new_cyclic(|me: &Weak<Queue>| Queue {
        tsfn: Mutex::new(Some(Tsfn(tsfn))),
        paced: libuv
            .is_none()
            .then(|| (Pace::default(), me.clone() as Weak<dyn Paced>)),
    });
    // Registered after the thread-safe function, so it runs before Node's own teardown of it
    // (clean-up hooks run in reverse order of registration).
    let hook_arg = Arc::into_raw(queue.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `close_queue` takes back the count leaked into `hook_arg`.
    let status = unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close_queue), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: close the queue now.
        unsafe { close_queue(hook_arg) };
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot register its clean-up hook",
        ));
    }
    let clients: Clients = Arc::default();
    let event_loop = Arc::new(match libuv {
        Some(uv) => uv_event_loop(env, &name, &queue, uv)?,
        None => thread_event_loop(raw_env, &queue)?,
    });
    env.set_instance_data(
        EnvState {
            clients: clients.clone(),
            queue,
            event_loop,
            pending: 0,
        },
        (),
        |_| {},
    )?;
    env.add_env_cleanup_hook(clients, close_all)?;
    env.get_instance_data::<EnvState>()?
        .ok_or_else(|| error::internal("crosslock: its per-environment state is missing"))
}

fn env_clients(env: &Env) -> napi::Result<Clients> {
    Ok(env_state(env)?.clients.clone())
}

/// A client's entry in its environment's registry of clients to close at exit: taken out by
/// [`Registration::forget`] (the program closes it) or when dropped (its JavaScript object was
/// collected without `close()`: the registry's handle would otherwise keep its connections open
/// and its locks renewed for as long as the process lives).
pub(crate) struct Registration {
    clients: Clients,
    key: u64,
}

impl Registration {
    /// Stops tracking the client.
    pub(crate) fn forget(&self) {
        let removed = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
        // Dropped with the registry unlocked: it may be the client's last handle.
        drop(removed);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.forget();
    }
}

/// Records `client` as belonging to `env`, until the registration is forgotten or dropped.
pub(crate) fn register(env: &Env, client: crosslock::Client) -> napi::Result<Registration> {
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    let clients = env_clients(env)?;
    clients
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, client);
    Ok(Registration { clients, key })
}

/// Closes, now and before returning, every client `env` connected and has not closed: what its
/// clean-up hook does at exit, for a runtime that runs no Node-API clean-up hook when its process
/// ends (Deno) but emits the process's `'exit'` event (the TypeScript layer calls it from there).
/// Its hook then finds nothing left to close.
pub(crate) fn close_env_clients(env: &Env) -> napi::Result<()> {
    if let Some(state) = env.get_instance_data::<EnvState>()? {
        close_all(state.clients.clone());
    }
    Ok(())
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
