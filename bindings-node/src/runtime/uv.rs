//! libuv as the JavaScript runtime provides it, and whether its `uv_poll` can watch the lanes.
//!
//! Node exports a real libuv. Other runtimes that load Node-API modules export stand-ins: Bun's
//! `uv_poll_*` end the process with a panic when called, Deno's `uv_poll` calls back once and
//! then no more while the data stays unread (libuv's polls are level-triggered). Neither can be
//! told apart by asking the runtime's name, and calling Bun's is fatal, so the question is put
//! to a forked copy of the process once, the first time an environment starts a call: it runs a
//! `uv_poll` on a private loop over a socket pair, with one byte left unread, and reports whether
//! the poll called back on each of three turns. A runtime that does not export every function
//! needed (Deno has no `uv_run`) is not asked. Where the answer is no, the lanes are watched by a
//! thread of crosslock's runtime instead (see `thread.rs`).
//!
//! `CROSSLOCK_NODE_WATCHER=thread` picks the portable path on any runtime (the test suites run
//! Node on it too, so it is proven where libuv is real as well).

use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::Object;
use napi::{Env, JsValue, sys};

use super::queue::{Completion, Queue, Scope, drain};

/// libuv's handle type number for `uv_poll_t` (`UV_POLL` in `uv.h`).
pub(crate) const UV_POLL: c_int = 8;
/// `UV_READABLE` in `uv.h`.
pub(crate) const UV_READABLE: c_int = 1;
/// `UV_RUN_NOWAIT` in `uv.h`.
const UV_RUN_NOWAIT: c_int = 2;

pub(crate) type PollCallback = unsafe extern "C" fn(*mut c_void, c_int, c_int);
pub(crate) type CloseCallback = unsafe extern "C" fn(*mut c_void);

/// The libuv functions the lanes' polls use, as the runtime exports them.
pub(crate) struct Uv {
    pub(crate) handle_size: unsafe extern "C" fn(c_int) -> usize,
    pub(crate) poll_init_socket:
        unsafe extern "C" fn(*mut sys::uv_loop_s, *mut c_void, c_int) -> c_int,
    pub(crate) poll_start: unsafe extern "C" fn(*mut c_void, c_int, PollCallback) -> c_int,
    pub(crate) poll_stop: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub(crate) close: unsafe extern "C" fn(*mut c_void, CloseCallback),
    pub(crate) unref: unsafe extern "C" fn(*mut c_void),
}

/// Only for the self-test's private loop.
struct LoopFns {
    loop_size: unsafe extern "C" fn() -> usize,
    loop_init: unsafe extern "C" fn(*mut c_void) -> c_int,
    run: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
}

/// How the lanes of this process's environments are watched.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Watcher {
    /// A `uv_poll` on the environment's own loop (Node).
    Libuv,
    /// A thread of crosslock's runtime, waking JavaScript through the completion queue.
    Thread,
}

impl Watcher {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Watcher::Libuv => "libuv",
            Watcher::Thread => "thread",
        }
    }
}

/// The runtime's libuv, if its `uv_poll` works (asked once per process).
pub(crate) fn libuv() -> Option<&'static Uv> {
    static ANSWER: OnceLock<Option<Uv>> = OnceLock::new();
    ANSWER.get_or_init(probe).as_ref()
}

/// Which watcher this process's environments use.
pub(crate) fn watcher() -> Watcher {
    if libuv().is_some() {
        Watcher::Libuv
    } else {
        Watcher::Thread
    }
}

/// Looks `name` up among the symbols the process exports (the runtime's own).
fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

macro_rules! resolve {
    ($name:literal, $kind:ty) => {
        // SAFETY: the symbol is libuv's function of that name, whose C signature the field's
        // type spells (uv.h).
        unsafe { std::mem::transmute::<*mut c_void, $kind>(symbol($name)?) }
    };
}

fn probe() -> Option<Uv> {
    if std::env::var_os("CROSSLOCK_NODE_WATCHER").is_some_and(|v| v == "thread") {
        return None;
    }
    let uv = Uv {
        handle_size: resolve!(c"uv_handle_size", unsafe extern "C" fn(c_int) -> usize),
        poll_init_socket: resolve!(
            c"uv_poll_init_socket",
            unsafe extern "C" fn(*mut sys::uv_loop_s, *mut c_void, c_int) -> c_int
        ),
        poll_start: resolve!(
            c"uv_poll_start",
            unsafe extern "C" fn(*mut c_void, c_int, PollCallback) -> c_int
        ),
        poll_stop: resolve!(c"uv_poll_stop", unsafe extern "C" fn(*mut c_void) -> c_int),
        close: resolve!(
            c"uv_close",
            unsafe extern "C" fn(*mut c_void, CloseCallback)
        ),
        unref: resolve!(c"uv_unref", unsafe extern "C" fn(*mut c_void)),
    };
    let private = LoopFns {
        loop_size: resolve!(c"uv_loop_size", unsafe extern "C" fn() -> usize),
        loop_init: resolve!(c"uv_loop_init", unsafe extern "C" fn(*mut c_void) -> c_int),
        run: resolve!(c"uv_run", unsafe extern "C" fn(*mut c_void, c_int) -> c_int),
    };
    polls_level_triggered(&uv, &private).then_some(uv)
}

/// Callbacks the self-test's poll received (in the forked copy).
static CALLED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_call(_handle: *mut c_void, _status: c_int, _events: c_int) {
    CALLED.fetch_add(1, Ordering::Relaxed);
}

/// The longest the forked copy may take; past it the answer is no.
const SELF_TEST_LIMIT: Duration = Duration::from_secs(5);
/// Bytes set aside for the self-test's loop and for its poll handle (libuv 1.x: about 1 KiB and
/// 160 bytes).
const SELF_TEST_MEMORY: usize = 16 * 1024;
/// Turns of the private loop, each of which must call the poll back.
const TURNS: usize = 3;

/// Forks, and in the copy polls one unread byte on a private loop for [`TURNS`] turns; `true` if
/// every turn called back. The copy writes nothing (its stdout and stderr go to /dev/null: Bun's
/// panic report is for nobody) and ends with `_exit`.
fn polls_level_triggered(uv: &Uv, private: &LoopFns) -> bool {
    // Everything the copy needs is made before the fork: it only calls libuv and `_exit`.
    // SAFETY: plain libc calls with out-pointers to locals; every descriptor made is closed below.
    unsafe {
        // Sized generously: asking libuv the sizes is already a call the copy must make (Bun's
        // `uv_loop_size` is one of its fatal stand-ins).
        let mut loop_mem = vec![0u64; SELF_TEST_MEMORY / 8];
        let mut poll_mem = vec![0u64; SELF_TEST_MEMORY / 8];
        let mut pair = [0 as c_int; 2];
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        ) != 0
        {
            return false;
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        let written = libc::write(pair[1], b"x".as_ptr().cast(), 1) == 1;
        let pid = if written && null >= 0 {
            libc::fork()
        } else {
            -1
        };
        if pid == 0 {
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            let uv_loop = loop_mem.as_mut_ptr().cast::<c_void>();
            let handle = poll_mem.as_mut_ptr().cast::<c_void>();
            let ok = (private.loop_size)() <= SELF_TEST_MEMORY
                && (uv.handle_size)(UV_POLL) <= SELF_TEST_MEMORY
                && (private.loop_init)(uv_loop) == 0
                && (uv.poll_init_socket)(uv_loop.cast(), handle, pair[0]) == 0
                && (uv.poll_start)(handle, UV_READABLE, count_call) == 0;
            if ok {
                for turn in 1..=TURNS {
                    (private.run)(uv_loop, UV_RUN_NOWAIT);
                    if CALLED.load(Ordering::Relaxed) != turn {
                        libc::_exit(1);
                    }
                }
                libc::_exit(0);
            }
            libc::_exit(1);
        }
        let answer = pid > 0 && exited_cleanly(pid);
        libc::close(pair[0]);
        libc::close(pair[1]);
        if null >= 0 {
            libc::close(null);
        }
        answer
    }
}

/// Waits (polling, up to [`SELF_TEST_LIMIT`]) for the forked copy `pid`; `true` if it exited 0.
/// A copy that takes longer is killed.
fn exited_cleanly(pid: libc::pid_t) -> bool {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: our own child; an out-pointer to a local.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if got == pid {
            return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        }
        if got < 0 {
            return false; // reaped by someone else (ECHILD): no answer is a no
        }
        if start.elapsed() > SELF_TEST_LIMIT {
            // SAFETY: our own child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

// --- The lanes watched by `uv_poll`s on the environment's loop ---------------------------------

/// One watched lane socket: its `uv_poll_t` (the first field of which, `data`, points here) and
/// what to call when it is readable.
struct Poller {
    /// The handle's memory (`uv_handle_size(UV_POLL)` bytes, 8-aligned).
    handle: Box<[u64]>,
    ready: crosslock::host::Readable,
    scope: Scope,
}

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
    let Some(uv) = libuv() else { return };
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

unsafe extern "C" fn poll_closed(handle: *mut c_void) {
    // SAFETY: libuv is done with the handle; the `Poller` is ours again, freed once.
    drop(unsafe { Box::from_raw(*handle.cast::<*mut Poller>()) });
}

impl crosslock::host::Watcher for UvWatcher {
    fn watch(&self, fd: RawFd, ready: crosslock::host::Readable) -> bool {
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

/// Core's view of the environment's libuv loop: its lanes watched by `uv_poll`s ([`UvWatcher`]).
pub(super) fn uv_event_loop(
    env: &Env,
    name: &napi::JsString,
    queue: &Arc<Queue>,
    uv: &'static Uv,
) -> napi::Result<crosslock::host::EventLoop> {
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
    Ok(crosslock::host::EventLoop::new(UvWatcher {
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
