//! The one tokio runtime of the process: built on first use, shut down when the last client is
//! closed, built again on the next use, and rebuilt after `fork()`.
//!
//! Everything that outlives a call (connections, the pub/sub reader, the watchdog) runs here, so
//! a binding never needs a runtime of its own.
//!
//! **Lifecycle.** Every connected client state keeps the runtime running ([`KeepAlive`]), and so
//! do a connect and a [`Client::close`](crate::Client::close) while they run. Calls in flight keep
//! their client's state, so a close does not stop them. When the last of them lets go (the last
//! client is closed, or dropped, and its calls have ended) the runtime shuts down: its threads
//! (the `crosslock-rt` workers and the blocking pool) are joined on a thread of its own,
//! `crosslock-stop`, which then ends, since the one letting go may be a runtime thread or a task,
//! which must never join itself. [`settle`] waits for that from any other thread (the Python
//! binding's sync `close()` does, so a `fork()` right after it finds no thread of ours). The next
//! use builds a new runtime, after waiting for the old one's threads when it can (not from inside
//! a runtime). Counting happens on open and close only: a call costs nothing more.
//!
//! A [`handle`] taken, or a task [`spawn`]ed, with no client open builds the runtime, which then
//! runs until the next time the last client is closed; hold a [`KeepAlive`] for as long as such a
//! handle must stay usable (a shut-down runtime's handle runs nothing, and its timers panic).
//!
//! **Fork.** A forked child inherits the parent's memory but not its threads: the parent's runtime
//! is unusable there and shutting it down would wait for threads that do not exist. So the state
//! is tagged with the pid that built it, and a child that finds a foreign pid leaks the old
//! runtime on purpose (with the parent's count of users) and builds a fresh one.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

/// The runtime of this process and who keeps it running.
struct Slot {
    /// The process that built `runtime` (a forked child finds its parent's here).
    pid: u32,
    runtime: Option<Runtime>,
    /// The live [`KeepAlive`]s of `pid`.
    users: usize,
    /// The `crosslock-stop` thread of the last shutdown, until someone joins it.
    stopping: Option<std::thread::JoinHandle<()>>,
}

static SLOT: Mutex<Slot> = Mutex::new(Slot {
    pid: 0,
    runtime: None,
    users: 0,
    stopping: None,
});

/// Changes (under [`SLOT`]'s lock) whenever a runtime is built or shut down: a thread's cached
/// handle is current while the epoch it was cached at is.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// How long a shutdown waits for the runtime's threads before leaving them to end by themselves
/// (a blocking task still opening a lane is bounded by the connect timeout).
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// A thread's copy of the current runtime's handle, so that a call reads no shared state but two
/// atomics (the pid and the epoch) and takes no lock.
struct Cached {
    pid: u32,
    epoch: u64,
    handle: Handle,
}

thread_local! {
    static CACHED: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// The cached process id; 0 until first asked, and again in a forked child (see [`pid`]).
static PID: AtomicU32 = AtomicU32::new(0);

/// This process's id, without a system call.
///
/// glibc no longer caches `getpid()` (since 2.25), and every call checks, several times, that it
/// is not running in a forked child (the runtime, the client's connections, the lanes): three
/// system calls per sync Python call. The id is cached here instead, and a `pthread_atfork` child
/// handler, registered with the first ask, clears it in every child that `fork()` makes (Python's
/// `os.fork`, `multiprocessing`); a child made without running fork handlers would have to
/// `exec` before it could run anything of ours anyway.
pub(crate) fn pid() -> u32 {
    let cached = PID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    extern "C" fn forked_child() {
        PID.store(0, Ordering::Relaxed);
    }
    static HOOKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: registers a plain function that only stores to an atomic (async-signal-safe, as a
    // child handler must be). Registration only fails for lack of memory; then nothing is cached.
    let hooked = *HOOKED
        .get_or_init(|| unsafe { libc::pthread_atfork(None, None, Some(forked_child)) } == 0);
    let pid = std::process::id();
    if hooked {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// Runs `f` with the current runtime's handle, building the runtime if there is none.
pub(crate) fn with_handle<R>(f: impl FnOnce(&Handle) -> R) -> R {
    let pid = pid();
    let epoch = EPOCH.load(Ordering::Acquire);
    let mut f = Some(f);
    let cached = CACHED.try_with(|cell| {
        let cached = cell.try_borrow().ok()?;
        let cached = cached.as_ref()?;
        if cached.pid != pid || cached.epoch != epoch {
            return None;
        }
        f.take().map(|f| f(&cached.handle))
    });
    if let Ok(Some(done)) = cached {
        return done;
    }
    let (epoch, handle) = {
        let slot = built(pid);
        let Some(runtime) = &slot.runtime else {
            unreachable!("`built` returns a slot with a runtime")
        };
        (EPOCH.load(Ordering::Relaxed), runtime.handle().clone())
    };
    let Some(f) = f.take() else {
        unreachable!("`f` runs only when the cached handle is current, and then this returned")
    };
    let done = f(&handle);
    // Not cached when the cache is in use further up this thread's stack (a call inside `f`).
    let _ = CACHED.try_with(|cell| {
        if let Ok(mut cached) = cell.try_borrow_mut() {
            let previous = cached.replace(Cached { pid, epoch, handle });
            if let Some(previous) = previous
                && previous.pid != pid
            {
                // The parent's, in a forked child: never dropped here.
                std::mem::forget(previous);
            }
        }
    });
    done
}

/// The slot, made this process's: a forked child forgets its parent's runtime, stopper and users.
fn lock(pid: u32) -> std::sync::MutexGuard<'static, Slot> {
    // A child forked while another thread held the lock would find it locked forever; the lock is
    // taken on builds, shutdowns, connects and closes only, so recover from poisoning and accept
    // that narrow window.
    let mut slot = crate::util::lock(&SLOT);
    if slot.pid != pid {
        std::mem::forget(slot.runtime.take());
        std::mem::forget(slot.stopping.take());
        slot.users = 0;
        slot.pid = pid;
        EPOCH.fetch_add(1, Ordering::Release);
    }
    slot
}

/// The slot with a runtime in it, built if there was none.
#[cold]
fn built(pid: u32) -> std::sync::MutexGuard<'static, Slot> {
    loop {
        let mut slot = lock(pid);
        if slot.runtime.is_some() {
            return slot;
        }
        // The previous runtime's threads end first, waited for without the lock (one of them may
        // need it to finish), unless this is one of them or a thread inside some runtime, which
        // must not block: then they end alongside the new one's.
        if Handle::try_current().is_err()
            && let Some(stopping) = slot.stopping.take()
        {
            drop(slot);
            let _ = stopping.join();
            continue;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("crosslock-rt")
            .enable_all()
            .build()
            .expect("crosslock: cannot start its tokio runtime (out of threads or memory?)");
        slot.runtime = Some(runtime);
        EPOCH.fetch_add(1, Ordering::Release);
        return slot;
    }
}

/// Shuts the runtime down on a `crosslock-stop` thread (joining its threads there).
fn stop(slot: &mut Slot) {
    let Some(runtime) = slot.runtime.take() else {
        return;
    };
    EPOCH.fetch_add(1, Ordering::Release);
    let earlier = slot.stopping.take();
    let stopper = move || {
        if let Some(earlier) = earlier {
            let _ = earlier.join();
        }
        runtime.shutdown_timeout(STOP_LIMIT);
    };
    match std::thread::Builder::new()
        .name("crosslock-stop".into())
        .spawn(stopper)
    {
        Ok(stopping) => slot.stopping = Some(stopping),
        Err(e) => {
            // No thread to spare: the threads are told to stop, and end by themselves.
            tracing::warn!(target: "crosslock", "cannot join the runtime's threads: {e}");
        }
    }
}

/// Keeps the process runtime running while it lives (see the [module](self) documentation).
///
/// Every connected client state holds one, so a Rust program only needs its own to keep using a
/// [`handle`] (or [`spawn`]) with no client open.
///
/// # Examples
///
/// ```
/// let keep = crosslock::runtime::KeepAlive::new();
/// let handle = crosslock::runtime::handle();
/// assert_eq!(handle.block_on(async { 6 * 7 }), 42);
/// drop(keep); // with no client open either, the runtime shuts down
/// crosslock::runtime::settle();
/// ```
#[derive(Debug)]
#[must_use = "the runtime may shut down as soon as it is dropped"]
pub struct KeepAlive {
    pid: u32,
}

impl KeepAlive {
    /// Builds the runtime if there is none, and keeps it running until dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let keep = crosslock::runtime::KeepAlive::new();
    /// let task = crosslock::runtime::spawn(async { 6 * 7 });
    /// assert_eq!(crosslock::runtime::block_on(task).unwrap(), 42);
    /// drop(keep);
    /// ```
    pub fn new() -> KeepAlive {
        let pid = pid();
        built(pid).users += 1;
        KeepAlive { pid }
    }
}

impl Default for KeepAlive {
    fn default() -> Self {
        KeepAlive::new()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // One made by the parent, dropped in a forked child: the child's runtime was never its.
        if self.pid != pid() {
            return;
        }
        let mut slot = lock(self.pid);
        slot.users = slot.users.saturating_sub(1);
        if slot.users == 0 {
            stop(&mut slot);
        }
    }
}

/// Waits until a shutdown of the runtime (the last client closed) has joined its threads; returns
/// at once when none is under way, and from inside a runtime (a thread of the one stopping would
/// wait for itself).
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: crosslock::Client) {
/// client.close().await; // the last client: the runtime shuts down in the background
/// # }
/// crosslock::runtime::settle(); // (on a thread outside any runtime) its threads are gone
/// ```
pub fn settle() {
    if Handle::try_current().is_ok() {
        return;
    }
    let stopping = lock(pid()).stopping.take();
    if let Some(stopping) = stopping {
        let _ = stopping.join();
    }
}

/// Whether the process runtime is running now: built, and not shut down since.
///
/// # Examples
///
/// ```
/// let keep = crosslock::runtime::KeepAlive::new();
/// assert!(crosslock::runtime::is_running());
/// drop(keep); // the runtime shuts down once no client and no keep-alive is left
/// ```
pub fn is_running() -> bool {
    lock(pid()).runtime.is_some()
}

/// A handle to the process-wide runtime, building it if needed.
///
/// It stays usable while a client is open or a [`KeepAlive`] lives: once the last of them is
/// gone the runtime shuts down, and this handle runs nothing more (the next call of ours builds a
/// new runtime).
///
/// # Examples
///
/// ```
/// let keep = crosslock::runtime::KeepAlive::new();
/// let handle = crosslock::runtime::handle();
/// let answer = handle.block_on(async { 6 * 7 });
/// assert_eq!(answer, 42);
/// drop(keep);
/// ```
pub fn handle() -> Handle {
    with_handle(Handle::clone)
}

/// Spawns `future` on the process-wide runtime.
///
/// The task runs while a client is open or a [`KeepAlive`] lives (a shutdown drops it).
///
/// # Examples
///
/// ```
/// let task = crosslock::runtime::spawn(async { 6 * 7 });
/// assert_eq!(crosslock::runtime::block_on(task).unwrap(), 42);
/// ```
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    with_handle(|handle| handle.spawn(future))
}

/// Runs blocking work (opening a lane) on the runtime's blocking pool.
pub(crate) fn spawn_blocking(f: impl FnOnce() + Send + 'static) {
    with_handle(|handle| drop(handle.spawn_blocking(f)));
}

/// Runs `f` inside the process runtime's context (tokio timers and spawns work there).
pub(crate) fn entered<R>(f: impl FnOnce() -> R) -> R {
    with_handle(|handle| {
        let _entered = handle.enter();
        f()
    })
}

/// `future`, polled inside the process runtime's context whoever polls it, so that what it
/// spawns and the timers and sockets it makes belong to crosslock's runtime rather than to the
/// caller's. For redis-rs's futures: a connection manager spawns its reconnect (and the new
/// connection's driver) on the runtime that polls the call that found the connection broken,
/// and a timer of a runtime that has since shut down panics when polled, which left a client
/// whose reconnect an application's runtime began failing every later call once that runtime
/// ended.
pub(crate) fn in_context<F: Future + Unpin>(future: F) -> InContext<F> {
    InContext { future }
}

/// See [`in_context`].
pub(crate) struct InContext<F> {
    future: F,
}

impl<F: Future + Unpin> Future for InContext<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        entered(|| std::pin::Pin::new(&mut self.future).poll(cx))
    }
}

/// Whether `handle` is the process runtime's (a task of crosslock's own, where the multiplexed
/// connections' drivers run), not an application's.
pub(crate) fn is_process_runtime(handle: &Handle) -> bool {
    let id = handle.id();
    with_handle(|current| current.id() == id)
}

/// Runs `future` to completion on the process-wide runtime, blocking the calling thread. The
/// runtime runs until it returns, even if `future` closes the last client half-way.
///
/// # Panics
///
/// When called from inside an asynchronous context (a runtime worker thread), as
/// [`tokio::runtime::Runtime::block_on`] does.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::runtime::block_on(async { 1 + 1 }), 2);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    // Kept running to the end of `future`, which may close the last client and go on.
    let _keep = KeepAlive::new();
    with_handle(|handle| handle.block_on(future))
}

/// Forgets the parent's runtime in a freshly forked child.
///
/// Calling it is optional (every entry point notices a foreign pid by itself), but a fork hook
/// (`os.register_at_fork(after_in_child=...)`) makes the switch eager.
///
/// # Examples
///
/// ```
/// crosslock::runtime::reset_after_fork(); // harmless outside a forked child
/// ```
pub fn reset_after_fork() {
    with_handle(|_| ());
}
