//! The environment's completion queue: one thread-safe function per environment, kept for its
//! lifetime, through which runtime threads hand the JavaScript thread its work ([`Completion`]),
//! and the drain that runs a lane's replies and what they wake in one go on that thread.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex, Weak};

use napi::{Env, sys};

use super::env::EnvState;
use super::nudge::{Pace, Paced};
use super::task::{self, JsTask};

/// Work for the JavaScript thread: poll a woken task (the common case, with no allocation of
/// its own), or run anything else (settle a promise, let go of a lane's handle).
pub(super) enum Completion {
    Poll(Arc<JsTask>),
    Run(Box<dyn FnOnce(Env) + Send>),
}

impl Completion {
    fn run(self, env: Env) {
        match self {
            Completion::Poll(t) => task::run(&t, &env),
            Completion::Run(work) => work(env),
        }
    }
}

/// An environment's completion queue as runtime threads see it.
pub(super) struct Queue {
    /// `None` once the environment is tearing down.
    pub(super) tsfn: Mutex<Option<Tsfn>>,
    /// Where the runtime's libuv is a stand-in: its deliveries, counted for the nudger
    /// (`nudge.rs`), and the queue as the nudger holds it.
    pub(super) paced: Option<(Pace, Weak<dyn Paced>)>,
}

pub(super) struct Tsfn(pub(super) sys::napi_threadsafe_function);

// SAFETY: napi thread-safe functions are made to be called from any thread; the pointer is only
// used under `Queue::tsfn`'s lock, which the environment's clean-up hook takes before releasing it.
unsafe impl Send for Tsfn {}

impl Queue {
    /// Queues `completion` for the JavaScript thread; drops it if the environment is gone.
    pub(super) fn send(&self, completion: Completion) {
        // Pushed by the JavaScript thread while it drains a lane's replies: run by that drain,
        // with no trip through the thread-safe function (see `poll_ready`). Not when the drain
        // is another environment's (its thread must not run this one's work).
        let Some(completion) = DRAIN.with(|drain| match drain.borrow_mut().as_mut() {
            Some((queue, local)) if ptr::eq(*queue, self) => {
                local.push(completion);
                None
            }
            _ => Some(completion),
        }) else {
            return;
        };
        self.call(completion);
    }

    /// Hands `completion` to the thread-safe function; drops it if the environment is gone.
    /// `false` if it is.
    fn call(&self, completion: Completion) -> bool {
        let data = Box::into_raw(Box::new(Delivery {
            completion,
            paced: self.paced.is_some(),
        }));
        let tsfn = self.tsfn.lock().unwrap_or_else(|e| e.into_inner());
        let status = match tsfn.as_ref() {
            // SAFETY: the thread-safe function is alive while it is in `tsfn` (see `Tsfn`); the
            // queue is unbounded, so a non-blocking call never fails for being full.
            Some(Tsfn(raw)) => unsafe {
                sys::napi_call_threadsafe_function(
                    *raw,
                    data.cast(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            },
            None => sys::Status::napi_closing,
        };
        if status != sys::Status::napi_ok {
            drop(tsfn);
            // SAFETY: not queued, so still ours.
            drop(unsafe { Box::from_raw(data) });
            return false;
        }
        // Counted while the thread-safe function is still taken, so the count never runs ahead of
        // a close; the delivery may already have run (and been counted as run) on the JavaScript
        // thread.
        if let Some((pace, me)) = &self.paced {
            pace.sent(me);
        }
        drop(tsfn);
        true
    }

    /// References (keeps the event loop alive) or unreferences the queue; nothing once closed.
    pub(super) fn hold_loop(&self, env: &Env, alive: bool) {
        let tsfn = self.tsfn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Tsfn(raw)) = tsfn.as_ref() {
            // SAFETY: on the JavaScript thread; the thread-safe function is alive while in `tsfn`.
            unsafe {
                if alive {
                    sys::napi_ref_threadsafe_function(env.raw(), *raw)
                } else {
                    sys::napi_unref_threadsafe_function(env.raw(), *raw)
                }
            };
        }
    }
}

impl Paced for Queue {
    fn pace(&self) -> &Pace {
        match &self.paced {
            Some((pace, _)) => pace,
            None => unreachable!("only paced queues are listed with the nudger"),
        }
    }

    fn knock(&self) -> bool {
        self.call(Completion::Run(Box::new(|_| ())))
    }
}

/// What one call of the thread-safe function carries.
struct Delivery {
    completion: Completion,
    /// Counted as run (the queue is paced): the environment's [`EnvState`] holds the queue.
    paced: bool,
}

/// Runs one completion on the JavaScript thread (or drops it when the environment is gone).
pub(super) unsafe extern "C" fn run_completion(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is the box `Queue::call` queued, handed back exactly once.
    let delivery = unsafe { Box::from_raw(data.cast::<Delivery>()) };
    if env.is_null() {
        return; // the environment is tearing down: nobody is left to settle
    }
    let env = Env::from_raw(env);
    if delivery.paced
        && let Ok(Some(state)) = env.get_instance_data::<EnvState>()
    {
        state.queue.pace().ran();
    }
    delivery.completion.run(env);
}

/// The environment's clean-up hook for its queue: closes it before Node finalizes it.
pub(super) unsafe extern "C" fn close_queue(arg: *mut c_void) {
    // SAFETY: the strong count `env_state` leaked for this hook, taken back once.
    let queue = unsafe { Arc::from_raw(arg.cast::<Queue>().cast_const()) };
    let taken = queue.tsfn.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(Tsfn(raw)) = taken {
        // SAFETY: no sender can reach it any more (taken under the lock); releasing our one
        // thread lets Node close and free it, dropping what is still queued (null env).
        unsafe {
            sys::napi_release_threadsafe_function(raw, sys::ThreadsafeFunctionReleaseMode::abort)
        };
    }
}

thread_local! {
    /// The environment (and its queue) whose [`JsTask`] this thread is polling, if it is: a
    /// settlement of that environment made there needs no trip through the queue.
    pub(super) static POLLING_IN: std::cell::Cell<(sys::napi_env, *const Queue)> =
        const { std::cell::Cell::new((ptr::null_mut(), ptr::null())) };
    /// The queue whose lane replies this (JavaScript) thread drains, if it does, and the
    /// completions queued on it meanwhile.
    pub(super) static DRAIN: std::cell::RefCell<Option<(*const Queue, Vec<Completion>)>> =
        const { std::cell::RefCell::new(None) };
    /// The lists the last drain on this thread used, emptied, for the next one.
    static SPARE: std::cell::Cell<Option<(Vec<Completion>, Vec<Completion>)>> =
        const { std::cell::Cell::new(None) };
}

/// How many times one drain takes its completions again for work queued while it ran.
const DRAIN_ROUNDS: usize = 16;
/// The longest list a drain keeps for the next one.
const SPARE_CAPACITY: usize = 64;

/// What a lane's readiness callback needs to run JavaScript-side work itself: its environment,
/// an async context to open a callback scope in (one per environment), and its queue (for work
/// left after the drain).
#[derive(Clone)]
pub(super) struct Scope {
    pub(super) env: sys::napi_env,
    pub(super) context: sys::napi_async_context,
    pub(super) queue: Arc<Queue>,
}

// SAFETY: the pointers are only used on the JavaScript thread (in `poll_ready`).
unsafe impl Send for Scope {}
unsafe impl Sync for Scope {}

/// Runs `read`, then the completions it (and they) queued on this thread, up to [`DRAIN_ROUNDS`]
/// times; what is left after goes through the queue, like any other work.
pub(super) fn drain(scope: &Scope, read: impl FnOnce()) {
    // The two lists are kept for the thread's next drain: a drain allocates nothing of its own.
    let (local, mut batch) = SPARE.with(|s| s.take()).unwrap_or_default();
    let outer = DRAIN.with(|d| d.replace(Some((Arc::as_ptr(&scope.queue), local))));
    read();
    let env = Env::from_raw(scope.env);
    for _ in 0..DRAIN_ROUNDS {
        DRAIN.with(|d| {
            if let Some((_, local)) = d.borrow_mut().as_mut() {
                std::mem::swap(local, &mut batch);
            }
        });
        if batch.is_empty() {
            break;
        }
        for completion in batch.drain(..) {
            completion.run(env);
        }
    }
    let mut left = DRAIN
        .with(|d| d.replace(outer))
        .map(|(_, local)| local)
        .unwrap_or_default();
    for completion in left.drain(..) {
        scope.queue.send(completion);
    }
    // A burst's long lists are let go rather than kept for the thread's lifetime.
    let keep = |list: Vec<Completion>| {
        if list.capacity() <= SPARE_CAPACITY {
            list
        } else {
            Vec::new()
        }
    };
    SPARE.with(|s| s.set(Some((keep(left), keep(batch)))));
}
