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
//! thread of crosslock's runtime instead (see `runtime.rs`).
//!
//! `CROSSLOCK_NODE_WATCHER=thread` picks the portable path on any runtime (the test suites run
//! Node on it too, so it is proven where libuv is real as well).

use std::ffi::{CStr, c_void};
use std::os::raw::c_int;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use napi::sys;

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
