//! Promises over crosslock's core, and the per-environment clean-up.
//!
//! No napi runtime is ever started. A call creates a promise on the JavaScript thread and polls
//! its core future right there ([`JsTask`], through `crosslock::runtime::EventLoop::poll`): its
//! Redis scripts go over the thread's own lane, a non-blocking connection its libuv loop watches
//! with a `uv_poll_t` ([`UvWatcher`]), so an uncontended call costs the loop one wake-up for its
//! reply and no thread hand-off; that wake-up also polls the futures the reply wakes, settles their
//! promises and runs the code awaiting them, in one callback scope ([`poll_ready`]). A future that waits on crosslock's runtime instead (a busy lock's
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
//! lanes are watched by a task on crosslock's runtime per socket instead ([`ThreadWatcher`]):
//! when one is readable it queues one completion that reads the replies and runs what they wake
//! on the JavaScript thread, in one drain, so a batch of replies costs JavaScript one wake-up.
//!
//! Every environment (the main thread and each `worker_thread`) keeps a registry of the clients it
//! connected. Its clean-up hook, run when the environment exits, closes them all: core's `close()`
//! cancels their pending acquires and releases the locks they hold, so terminating a worker
//! leaves no lock and no waiter behind. A settlement that arrives after its environment is gone
//! is dropped: the queue is closed first, under the same lock every sender takes, so no runtime
//! thread ever calls into a freed thread-safe function. Another hook closes the lane handles,
//! which libuv requires before a worker's loop may close.

use std::collections::HashMap;
use std::ffi::c_void;
use std::future::Future;
use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, JsValue, sys};

use self::uv::{UV_POLL, UV_READABLE, Uv};
use crate::error;

pub(crate) mod uv;

/// Work for the JavaScript thread: poll a woken task (the common case, with no allocation of
/// its own), or run anything else (settle a promise, let go of a lane's handle).
enum Completion {
    Poll(Arc<JsTask>),
    Run(Box<dyn FnOnce(Env) + Send>),
}

impl Completion {
    fn run(self, env: Env) {
        match self {
            Completion::Poll(task) => task.run(&env),
            Completion::Run(work) => work(env),
        }
    }
}

/// An environment's completion queue as runtime threads see it.
struct Queue {
    /// `None` once the environment is tearing down.
    tsfn: Mutex<Option<Tsfn>>,
}

struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: napi thread-safe functions are made to be called from any thread; the pointer is only
// used under `Queue::tsfn`'s lock, which the environment's clean-up hook takes before releasing it.
unsafe impl Send for Tsfn {}

impl Queue {
    /// Queues `completion` for the JavaScript thread; drops it if the environment is gone.
    fn send(&self, completion: Completion) {
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
        let data = Box::into_raw(Box::new(completion));
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
        drop(tsfn);
        if status != sys::Status::napi_ok {
            // SAFETY: not queued, so still ours.
            drop(unsafe { Box::from_raw(data) });
        }
    }

    /// References (keeps the event loop alive) or unreferences the queue; nothing once closed.
    fn hold_loop(&self, env: &Env, alive: bool) {
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

/// Runs one completion on the JavaScript thread (or drops it when the environment is gone).
unsafe extern "C" fn run_completion(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is the box `Queue::send` queued, handed back exactly once.
    let completion = unsafe { Box::from_raw(data.cast::<Completion>()) };
    if env.is_null() {
        return; // the environment is tearing down: nobody is left to settle
    }
    completion.run(Env::from_raw(env));
}

/// The environment's clean-up hook for its queue: closes it before Node finalizes it.
unsafe extern "C" fn close_queue(arg: *mut c_void) {
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

thread_local! {
    /// The environment (and its queue) whose [`JsTask`] this thread is polling, if it is: a
    /// settlement of that environment made there needs no trip through the queue.
    static POLLING_IN: std::cell::Cell<(sys::napi_env, *const Queue)> =
        const { std::cell::Cell::new((ptr::null_mut(), ptr::null())) };
    /// The queue whose lane replies this (JavaScript) thread drains, if it does, and the
    /// completions queued on it meanwhile.
    static DRAIN: std::cell::RefCell<Option<(*const Queue, Vec<Completion>)>> =
        const { std::cell::RefCell::new(None) };
    /// The lists the last drain on this thread used, emptied, for the next one.
    static SPARE: std::cell::Cell<Option<(Vec<Completion>, Vec<Completion>)>> =
        const { std::cell::Cell::new(None) };
}

/// How many times one drain takes its completions again for work queued while it ran.
const DRAIN_ROUNDS: usize = 16;
/// The longest list a drain keeps for the next one.
const SPARE_CAPACITY: usize = 64;

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
    let task = Arc::new(JsTask {
        future: Mutex::new(Some(Box::pin(async move {
            let result = work.await;
            settle.with(move |env| {
                let value = finish(env, result.map_err(|e| error::to_napi(&e))?)?;
                // SAFETY: on the JavaScript thread (the completion runs there).
                unsafe { R::to_napi_value(env.raw(), value) }
            });
        }))),
        queue: state.queue.clone(),
        event_loop: state.event_loop.clone(),
        scheduled: AtomicBool::new(false),
    });
    task.run(env);
    Ok(Object::from_raw(env.raw(), promise))
}

/// A core future polled on its environment's JavaScript thread: started in the call that made
/// its promise, its round trips on the thread's own lane (watched by libuv, [`UvWatcher`]), and
/// polled again there whenever it is woken, from any thread, through the completion queue.
struct JsTask {
    future: Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    queue: Arc<Queue>,
    event_loop: Arc<crosslock::runtime::EventLoop>,
    scheduled: AtomicBool,
}

impl Wake for JsTask {
    fn wake(self: Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let task = self.clone();
            self.queue.send(Completion::Poll(task));
        }
    }
}

impl JsTask {
    /// Polls the future once (on the JavaScript thread of `env`); drops it once finished. A
    /// panic drops it too, and its [`Settle`] rejects the promise.
    fn run(self: &Arc<Self>, env: &Env) {
        struct Reset((sys::napi_env, *const Queue));
        impl Drop for Reset {
            fn drop(&mut self) {
                POLLING_IN.with(|p| p.set(self.0));
            }
        }
        let _reset = Reset(POLLING_IN.with(|p| p.replace((env.raw(), Arc::as_ptr(&self.queue)))));
        self.scheduled.store(false, Ordering::Release);
        let mut slot = self.future.lock().unwrap_or_else(|e| e.into_inner());
        let Some(future) = slot.as_mut() else { return };
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.event_loop.poll(future.as_mut(), &mut cx)
        }));
        if !matches!(polled, Ok(Poll::Pending)) {
            *slot = None;
        }
    }
}

/// One watched lane socket: its `uv_poll_t` (the first field of which, `data`, points here) and
/// what to call when it is readable.
struct Poller {
    /// The handle's memory (`uv_handle_size(UV_POLL)` bytes, 8-aligned).
    handle: Box<[u64]>,
    ready: crosslock::runtime::Readable,
    scope: Scope,
}

/// What a lane's readiness callback needs to run JavaScript-side work itself: its environment,
/// an async context to open a callback scope in (one per environment), and its queue (for work
/// left after the drain).
#[derive(Clone)]
struct Scope {
    env: sys::napi_env,
    context: sys::napi_async_context,
    queue: Arc<Queue>,
}

// SAFETY: the pointers are only used on the JavaScript thread (in `poll_ready`).
unsafe impl Send for Scope {}
unsafe impl Sync for Scope {}

/// How core watches its lane sockets on an environment's libuv loop: a `uv_poll_t` per socket,
/// unreferenced (an idle lane never keeps the process alive; a pending promise does).
struct UvWatcher {
    uv: &'static Uv,
    uv_loop: UvLoop,
    queue: Arc<Queue>,
    scope: Scope,
    /// fd → its `Poller` (a raw `Box`), on the JavaScript thread only.
    pollers: Pollers,
}

type Pollers = Arc<Mutex<HashMap<RawFd, usize>>>;

/// The environment's clean-up hook for its lane handles: a loop is only closed once every handle
/// on it is (a worker's exit aborts the process otherwise), so each is stopped and closed here,
/// its close callback run by the loop's last turns.
unsafe extern "C" fn close_pollers(arg: *mut c_void) {
    // SAFETY: the strong count `env_state` leaked for this hook, taken back once.
    let pollers = unsafe { Arc::from_raw(arg.cast::<Mutex<HashMap<RawFd, usize>>>().cast_const()) };
    let all: Vec<usize> = pollers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, poller)| poller)
        .collect();
    // Pollers are only made where the runtime's libuv is real.
    let Some(uv) = uv::libuv() else { return };
    for poller in all {
        // SAFETY: live `Poller`s from `watch` (removed from the map, so closed once); freed by
        // `poll_closed`.
        unsafe {
            let handle = (*(poller as *mut Poller))
                .handle
                .as_mut_ptr()
                .cast::<c_void>();
            (uv.poll_stop)(handle);
            (uv.close)(handle, poll_closed);
        }
    }
}

struct UvLoop(*mut sys::uv_loop_s);

// SAFETY: the loop pointer is only used on the JavaScript thread (`watch` runs there, inside a
// poll; `unwatch` sends its work there through the queue).
unsafe impl Send for UvLoop {}
unsafe impl Sync for UvLoop {}

/// A lane is readable. Its replies are read, and what they wake (the futures waiting on them, the
/// promises they settle) runs right here, inside a callback scope whose closing runs the
/// microtasks (the code awaiting those promises): the same turn of the loop, instead of a trip
/// through the thread-safe function (an `eventfd` write, another `epoll` wake-up and read).
unsafe extern "C" fn poll_ready(handle: *mut c_void, _status: c_int, _events: c_int) {
    // SAFETY: `data`, the handle's first field, points at its `Poller` until `poll_closed`.
    let poller = unsafe { &*(*handle.cast::<*const Poller>()) };
    let scope = &poller.scope;
    // SAFETY: on the JavaScript thread of `scope.env` (libuv calls back on its loop's thread),
    // with no JavaScript on the stack: what `napi_open_callback_scope` is for. Each scope opened
    // is closed, in reverse order.
    unsafe {
        let mut handles = ptr::null_mut();
        if sys::napi_open_handle_scope(scope.env, &mut handles) != sys::Status::napi_ok {
            // An error status is seen by the read `ready` makes; the work goes through the queue.
            poller.ready.ready();
            return;
        }
        let mut resource = ptr::null_mut();
        let mut callback = ptr::null_mut();
        let opened = sys::napi_create_object(scope.env, &mut resource) == sys::Status::napi_ok
            && sys::napi_open_callback_scope(scope.env, resource, scope.context, &mut callback)
                == sys::Status::napi_ok;
        if opened {
            drain(scope, || poller.ready.ready());
            sys::napi_close_callback_scope(scope.env, callback);
        } else {
            poller.ready.ready();
        }
        sys::napi_close_handle_scope(scope.env, handles);
    }
}

/// Runs `read`, then the completions it (and they) queued on this thread, up to [`DRAIN_ROUNDS`]
/// times; what is left after goes through the queue, like any other work.
fn drain(scope: &Scope, read: impl FnOnce()) {
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

unsafe extern "C" fn poll_closed(handle: *mut c_void) {
    // SAFETY: libuv is done with the handle; the `Poller` is ours again, freed once.
    drop(unsafe { Box::from_raw(*handle.cast::<*mut Poller>()) });
}

impl crosslock::runtime::Watcher for UvWatcher {
    fn watch(&self, fd: RawFd, ready: crosslock::runtime::Readable) -> bool {
        // SAFETY: on the JavaScript thread (inside a poll); the handle memory lives in the
        // `Poller` until `poll_closed` frees it.
        unsafe {
            let uv = self.uv;
            let words = (uv.handle_size)(UV_POLL).div_ceil(8);
            let poller = Box::into_raw(Box::new(Poller {
                handle: vec![0u64; words].into_boxed_slice(),
                ready,
                scope: self.scope.clone(),
            }));
            let handle = (*poller).handle.as_mut_ptr().cast::<c_void>();
            if (uv.poll_init_socket)(self.uv_loop.0, handle, fd) != 0 {
                drop(Box::from_raw(poller));
                return false;
            }
            *handle.cast::<*mut Poller>() = poller;
            if (uv.poll_start)(handle, UV_READABLE, poll_ready) != 0 {
                (uv.close)(handle, poll_closed);
                return false;
            }
            (uv.unref)(handle);
            self.pollers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(fd, poller as usize);
            true
        }
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let pollers = self.pollers.clone();
        let uv = self.uv;
        // On the JavaScript thread; dropped unrun (the environment is gone) it closes `fd` all
        // the same.
        self.queue.send(Completion::Run(Box::new(move |_| {
            let poller = pollers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&fd);
            match poller {
                // SAFETY: a live `Poller` from `watch`; stopped before its fd is closed, freed
                // by `poll_closed` once libuv is done with it.
                Some(poller) => unsafe {
                    let handle = (*(poller as *mut Poller))
                        .handle
                        .as_mut_ptr()
                        .cast::<c_void>();
                    (uv.poll_stop)(handle);
                    done();
                    (uv.close)(handle, poll_closed);
                },
                None => done(),
            }
        })));
    }
}

/// How core watches its lane sockets where the runtime's libuv cannot (Bun, Deno; see
/// `uv.rs`): a task on crosslock's runtime per socket waits for it to be readable, then wakes
/// JavaScript once through the completion queue, where the lane's replies are read and what they
/// wake runs in one drain, as [`poll_ready`] does under libuv. The task waits for that drain
/// before it looks at the socket again, so a batch of replies costs JavaScript one wake-up.
struct ThreadWatcher {
    scope: Scope,
    /// The sockets watched, each with its task's [`Stop`], until the task ends.
    watching: Watching,
}

type Watching = Arc<Mutex<HashMap<RawFd, Arc<Stop>>>>;

/// How [`ThreadWatcher::unwatch`] (or the environment's exit) stops a socket's task, and what
/// runs once the task has let go of the socket.
#[derive(Default)]
struct Stop {
    notify: tokio::sync::Notify,
    state: Mutex<StopState>,
}

#[derive(Default)]
struct StopState {
    /// What closes the socket, once the task has let go of it.
    done: Option<Box<dyn FnOnce() + Send>>,
    /// The task has let go of the socket.
    finished: bool,
}

impl Stop {
    /// The task let go of the socket: runs what closes it, if that is already asked for.
    fn finished(&self) {
        let done = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.finished = true;
            state.done.take()
        };
        if let Some(done) = done {
            done();
        }
    }

    /// Asks the task to stop and runs `done` once it has let go of the socket.
    fn stop(&self, done: Box<dyn FnOnce() + Send>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.finished {
            drop(state);
            return done();
        }
        state.done = Some(done);
        drop(state);
        self.notify.notify_one();
    }
}

/// Watches one lane socket (a duplicate of its descriptor, so the registration never outlives
/// what it names) until stopped, or until the environment is gone (its drain is dropped unrun).
async fn watch_on_runtime(
    socket: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    ready: Arc<crosslock::runtime::Readable>,
    scope: Scope,
    stop: Arc<Stop>,
) {
    loop {
        let guard = tokio::select! {
            biased;
            () = stop.notify.notified() => break,
            readable = socket.readable() => match readable {
                Ok(guard) => guard,
                Err(_) => break,
            },
        };
        let (drained, read) = tokio::sync::oneshot::channel::<()>();
        let (ready, scope_js) = (ready.clone(), scope.clone());
        scope.queue.send(Completion::Run(Box::new(move |_| {
            drain(&scope_js, || ready.ready());
            let _ = drained.send(());
        })));
        tokio::select! {
            biased;
            () = stop.notify.notified() => break,
            read = read => if read.is_err() { break },
        }
        // The reactor is edge-triggered; the guard clears only the readiness it reported, so
        // data that arrived while JavaScript read is seen again (as `uv_poll` would).
        let mut guard = guard;
        guard.clear_ready();
    }
    drop(socket);
    stop.finished();
}

impl crosslock::runtime::Watcher for ThreadWatcher {
    fn watch(&self, fd: RawFd, ready: crosslock::runtime::Readable) -> bool {
        // SAFETY: `fd` is the lane's socket, open for the length of this call.
        let Ok(own) = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
        else {
            return false;
        };
        let handle = crosslock::runtime::handle();
        let registered = {
            let _entered = handle.enter();
            // Deprecated for descriptors the `AsyncFd` does not own; this one owns it.
            #[allow(deprecated)]
            tokio::io::unix::AsyncFd::with_interest(own, tokio::io::Interest::READABLE)
        };
        let Ok(socket) = registered else { return false };
        let stop = Arc::new(Stop::default());
        self.watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fd, stop.clone());
        drop(handle.spawn(watch_on_runtime(
            socket,
            Arc::new(ready),
            self.scope.clone(),
            stop,
        )));
        true
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let stop = self
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fd);
        match stop {
            Some(stop) => stop.stop(done),
            None => done(),
        }
    }
}

/// The environment's clean-up hook for the lanes' tasks: each is stopped (its socket, a
/// duplicate, closed with it), so a terminated worker leaves no connection open.
unsafe extern "C" fn stop_watching(arg: *mut c_void) {
    // SAFETY: the strong count `thread_event_loop` leaked for this hook, taken back once.
    let watching = unsafe { Arc::from_raw(arg.cast::<Mutex<HashMap<RawFd, Arc<Stop>>>>()) };
    let all: Vec<Arc<Stop>> = watching
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, stop)| stop)
        .collect();
    for stop in all {
        stop.stop(Box::new(|| {}));
    }
}

/// Core's view of an environment whose runtime has no real libuv: its lanes watched by tasks
/// on crosslock's runtime ([`ThreadWatcher`]).
fn thread_event_loop(
    raw_env: sys::napi_env,
    queue: &Arc<Queue>,
) -> napi::Result<crosslock::runtime::EventLoop> {
    let watching: Watching = Arc::default();
    let hook_arg = Arc::into_raw(watching.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `stop_watching` takes back the count leaked into `hook_arg`.
    let status = unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(stop_watching), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: take the count back now.
        drop(unsafe { Arc::from_raw(hook_arg.cast::<Mutex<HashMap<RawFd, Arc<Stop>>>>()) });
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot register its clean-up hook",
        ));
    }
    Ok(crosslock::runtime::EventLoop::new(ThreadWatcher {
        scope: Scope {
            env: raw_env,
            context: ptr::null_mut(),
            queue: queue.clone(),
        },
        watching,
    }))
}

/// The clients one environment connected, closed by its clean-up hook.
type Clients = Arc<Mutex<HashMap<u64, crosslock::Client>>>;

/// The environment's instance data (used on its JavaScript thread only).
struct EnvState {
    clients: Clients,
    queue: Arc<Queue>,
    /// Core's view of this thread's libuv loop: the lanes its calls make their round trips on.
    event_loop: Arc<crosslock::runtime::EventLoop>,
    /// Promises created and not yet settled; the queue keeps the event loop alive while > 0.
    pending: usize,
}

impl EnvState {
    /// A promise was created: keep the loop alive until it settles.
    fn started(&mut self, env: &Env) {
        self.pending += 1;
        if self.pending == 1 {
            self.queue.hold_loop(env, true);
        }
    }

    /// A promise was settled.
    fn settled(&mut self, env: &Env) {
        self.pending = self.pending.saturating_sub(1);
        if self.pending == 0 {
            self.queue.hold_loop(env, false);
        }
    }
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn env_state(env: &Env) -> napi::Result<&'static mut EnvState> {
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
    let queue = Arc::new(Queue {
        tsfn: Mutex::new(Some(Tsfn(tsfn))),
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
    let event_loop = Arc::new(match uv::libuv() {
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

/// Core's view of the environment's libuv loop: its lanes watched by `uv_poll`s ([`UvWatcher`]).
fn uv_event_loop(
    env: &Env,
    name: &napi::JsString,
    queue: &Arc<Queue>,
    uv: &'static Uv,
) -> napi::Result<crosslock::runtime::EventLoop> {
    let raw_env = env.raw();
    let mut uv_loop = ptr::null_mut();
    // SAFETY: on the JavaScript thread, with an out-pointer to a local.
    let status = unsafe { sys::napi_get_uv_event_loop(raw_env, &mut uv_loop) };
    if status != sys::Status::napi_ok || uv_loop.is_null() {
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot find the event loop",
        ));
    }
    let pollers: Pollers = Arc::default();
    let hook_arg = Arc::into_raw(pollers.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `close_pollers` takes back the count leaked into `hook_arg`.
    let status = unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close_pollers), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: take the count back now.
        drop(unsafe { Arc::from_raw(hook_arg.cast::<Mutex<HashMap<RawFd, usize>>>()) });
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot register its clean-up hook",
        ));
    }
    // The async context the lanes' readiness callbacks open their callback scopes in (async
    // hooks see the work as a "crosslock" resource); destroyed by a clean-up hook.
    let resource = Object::new(env)?;
    let mut context = ptr::null_mut();
    // SAFETY: on the JavaScript thread, with live values and an out-pointer to a local.
    let status = unsafe { sys::napi_async_init(raw_env, resource.raw(), name.raw(), &mut context) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot create its async context",
        ));
    }
    let hook_arg = Box::into_raw(Box::new((raw_env, context))).cast::<c_void>();
    // SAFETY: `destroy_context` takes back the box leaked into `hook_arg`, once, while the
    // environment is still alive.
    let status =
        unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(destroy_context), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: destroy the context now.
        unsafe { destroy_context(hook_arg) };
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot register its clean-up hook",
        ));
    }
    Ok(crosslock::runtime::EventLoop::new(UvWatcher {
        uv,
        uv_loop: UvLoop(uv_loop),
        queue: queue.clone(),
        scope: Scope {
            env: raw_env,
            context,
            queue: queue.clone(),
        },
        pollers,
    }))
}

/// The environment's clean-up hook for the lanes' async context.
unsafe extern "C" fn destroy_context(arg: *mut c_void) {
    // SAFETY: the box `env_state` leaked for this hook, taken back once: the environment and the
    // context it made, destroyed on its thread while it is alive (hooks run before teardown).
    let (env, context) =
        *unsafe { Box::from_raw(arg.cast::<(sys::napi_env, sys::napi_async_context)>()) };
    unsafe { sys::napi_async_destroy(env, context) };
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
