//! Promises over crosslock's core, and the per-environment clean-up.
//!
//! No napi runtime is ever started. A call creates a promise on the JavaScript thread and polls
//! its core future right there ([`JsTask`](task::JsTask), through `crosslock::host::EventLoop::poll`): its
//! Redis scripts go over the thread's own lane, a non-blocking connection its libuv loop watches
//! with a `uv_poll_t` ([`UvWatcher`](uv::UvWatcher)), so an uncontended call costs the loop one wake-up for its
//! reply and no thread hand-off; that wake-up also polls the futures the reply wakes, settles their
//! promises and runs the code awaiting them, in one callback scope ([`poll_ready`](uv::poll_ready)). A future that waits on crosslock's runtime instead (a busy lock's
//! wait loop, a timer) is woken from a runtime thread, and everything that must happen on the
//! JavaScript thread (polling a woken future, settling a promise, letting go of a lane's handle)
//! goes through the environment's one completion queue: a thread-safe function created once per
//! environment and kept for its lifetime (not one per call, as napi-rs's `JsDeferred` does: that
//! costs a libuv handle opened and closed and a clean-up hook added and removed per promise). The
//! queue keeps the event loop alive only while a promise is pending (it is referenced when the
//! first one starts and unreferenced when the last one settles), like any pending I/O; the lane
//! handles never do.
//!
//! Where the runtime's libuv is a stand-in (Bun, Deno: `uv.rs` tells, once per process), the
//! lanes are watched by a task on crosslock's runtime per socket instead ([`ThreadWatcher`](thread::ThreadWatcher)):
//! when one is readable it queues one completion that reads the replies and runs what they wake
//! on the JavaScript thread, in one drain, so a batch of replies costs JavaScript one wake-up.
//! Those queues are paced (`nudge.rs`): a delivery left unrun for a moment gets a second knock,
//! since Deno's thread-safe function can lose the wake-up of the first.
//!
//! Every environment (the main thread and each `worker_thread`) keeps a registry of the clients it
//! connected. Its clean-up hook, run when the environment exits, closes them all: core's `close()`
//! cancels their pending acquires and releases the locks they hold, so terminating a worker
//! leaves no lock and no waiter behind. A settlement that arrives after its environment is gone
//! is dropped: the queue is closed first, under the same lock every sender takes, so no runtime
//! thread ever calls into a freed thread-safe function. Another hook closes the lane handles,
//! which libuv requires before a worker's loop may close.
//!
//! The modules: this one starts promises and settles them ([`promise`], [`promise_with`]);
//! `queue.rs` is the completion queue (the thread-safe function) and the drain; `task.rs` the
//! future polled on the JavaScript thread; `uv.rs` libuv as the runtime provides it and the lanes'
//! `uv_poll`s; `thread.rs` the lanes watched from crosslock's runtime where libuv is a stand-in;
//! `env.rs` the per-environment state, the registry of clients and the clean-up hooks; `nudge.rs`
//! the second knock for deliveries a runtime's thread-safe function did not wake JavaScript for.

use std::future::Future;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, sys};

use crate::error;

mod env;
mod nudge;
mod queue;
mod task;
mod thread;
pub(crate) mod uv;

use env::{EnvState, env_state};
pub(crate) use env::{Registration, close_env_clients, register};
use queue::{Completion, POLLING_IN, Queue};
use task::{JsHost, JsTask};

/// A promise on its way to be settled: settles it exactly once, with `resolve`/`reject`, or, if
/// the task is dropped without either (it panicked), with an internal error, so no promise is left
/// pending forever.
struct Settle {
    pending: Option<(RawDeferred, Arc<Queue>)>,
}

struct RawDeferred(sys::napi_deferred);

// SAFETY: the deferred is only used on the JavaScript thread, inside the completion it travels in.
unsafe impl Send for RawDeferred {}

impl RawDeferred {
    /// The pointer (a method, so a closure captures the whole `Send` wrapper, not the field).
    fn get(&self) -> sys::napi_deferred {
        self.0
    }
}

impl Settle {
    /// Settles the promise (on the JavaScript thread) with what `outcome` produces there.
    fn with<F>(mut self, outcome: F)
    where
        F: FnOnce(Env) -> napi::Result<sys::napi_value> + Send + 'static,
    {
        if let Some((deferred, queue)) = self.pending.take() {
            send_settlement(deferred, &queue, outcome);
        }
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let Some((deferred, queue)) = self.pending.take() {
            send_settlement(deferred, &queue, |_| {
                Err(error::internal(
                    "crosslock: an operation ended abnormally (a panic in the native module); \
                     please report it",
                ))
            });
        }
    }
}

fn send_settlement<F>(deferred: RawDeferred, queue: &Queue, outcome: F)
where
    F: FnOnce(Env) -> napi::Result<sys::napi_value> + Send + 'static,
{
    let (here, polling) = POLLING_IN.with(std::cell::Cell::get);
    if here.is_null() || !ptr::eq(polling, queue) {
        queue.send(Completion::Run(Box::new(move |env| {
            settle(env, &deferred, outcome);
        })));
    } else {
        // On the JavaScript thread, inside a Node-API call or a queue callback of `here`, the
        // environment of `queue`: settled right away, with nothing boxed.
        settle(Env::from_raw(here), &deferred, outcome);
    }
}

/// Settles `deferred` with what `outcome` makes, on the JavaScript thread of `env` (the
/// environment that created it), once.
fn settle<F>(env: Env, deferred: &RawDeferred, outcome: F)
where
    F: FnOnce(Env) -> napi::Result<sys::napi_value>,
{
    let raw = env.raw();
    let deferred = deferred.get();
    let settled = outcome(env);
    // SAFETY: on the JavaScript thread of the environment that created the deferred, which is
    // settled here once (the caller hands it over by value or from a completion run once).
    unsafe {
        match settled {
            Ok(value) => sys::napi_resolve_deferred(raw, deferred, value),
            Err(err) => {
                let reason = ToNapiValue::to_napi_value(raw, err)
                    .unwrap_or_else(|_| plain_error(raw, c"crosslock: an operation failed"));
                sys::napi_reject_deferred(raw, deferred, reason)
            }
        };
    }
    if let Ok(Some(state)) = env.get_instance_data::<EnvState>() {
        state.settled(&env);
    }
}

/// A plain `Error` with `message`, for when the real error cannot be converted (a promise must
/// never be rejected with no value: napi refuses it and the promise would stay pending).
///
/// # Safety
///
/// On the JavaScript thread of `env`.
unsafe fn plain_error(env: sys::napi_env, message: &std::ffi::CStr) -> sys::napi_value {
    let mut text = ptr::null_mut();
    let mut error = ptr::null_mut();
    // SAFETY: the caller is on the JavaScript thread; out-pointers to locals, a NUL-terminated
    // message (length -1: up to the NUL).
    unsafe {
        sys::napi_create_string_utf8(env, message.as_ptr(), -1, &mut text);
        sys::napi_create_error(env, ptr::null_mut(), text, &mut error);
    }
    error
}

/// Starts `work` on this JavaScript thread (see the module docs); a promise of its result.
pub(crate) fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    F: Future<Output = crosslock::Result<T>> + Send + 'static,
    T: ToNapiValue + Send + 'static,
{
    promise_with(env, work, |_, value| Ok(value))
}

/// Starts `work` on this JavaScript thread; `finish` turns its value into the promise's value
/// there (where it may use `env`).
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
    let work = crate::telemetry::traced(env, work);
    let state = env_state(env)?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: on the JavaScript thread, with out-pointers to locals.
    let status = unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot create a promise",
        ));
    }
    state.started(env);
    let settle = Settle {
        pending: Some((RawDeferred(deferred), state.queue.clone())),
    };
    let task = JsTask::new(
        async move {
            let result = work.await;
            settle.with(move |env| {
                let value = finish(env, result.map_err(|e| error::to_napi(&e))?)?;
                // SAFETY: on the JavaScript thread (the completion runs there).
                unsafe { R::to_napi_value(env.raw(), value) }
            });
        },
        JsHost {
            queue: state.queue.clone(),
            event_loop: state.event_loop.clone(),
        },
    );
    task::run(&task, env);
    Ok(Object::from_raw(env.raw(), promise))
}
