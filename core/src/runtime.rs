//! The one tokio runtime of the process, created on first use and rebuilt after `fork()`.
//!
//! Everything that outlives a call (connections, the pub/sub reader, the watchdog) runs here, so
//! a binding never needs a runtime of its own. A forked child inherits the parent's memory but not
//! its threads: the parent's runtime is unusable there and dropping it would wait for threads that
//! do not exist. So the state is tagged with the pid that built it, and a child that finds a
//! foreign pid leaks the old runtime on purpose and builds a fresh one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use crate::loop_lane::{EventLoop, Readable, Watcher};

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

struct ProcessRuntime {
    pid: u32,
    runtime: Runtime,
}

static CURRENT: AtomicPtr<ProcessRuntime> = AtomicPtr::new(std::ptr::null_mut());
static BUILD: Mutex<()> = Mutex::new(());

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

fn current() -> &'static ProcessRuntime {
    let pid = pid();
    let ptr = CURRENT.load(Ordering::Acquire);
    // SAFETY: a non-null pointer in CURRENT came from Box::into_raw below and is never freed
    // (runtimes are leaked, never dropped), so it is valid for 'static.
    if let Some(state) = unsafe { ptr.as_ref() }
        && state.pid == pid
    {
        return state;
    }
    build(pid)
}

#[cold]
fn build(pid: u32) -> &'static ProcessRuntime {
    // A child forked while another thread held BUILD would find it locked forever; building only
    // happens once per process, so recover from poisoning and accept that narrow window.
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let ptr = CURRENT.load(Ordering::Acquire);
    // SAFETY: as in `current`.
    if let Some(state) = unsafe { ptr.as_ref() }
        && state.pid == pid
    {
        return state;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("crosslock-rt")
        .enable_all()
        .build()
        .expect("crosslock: cannot start its tokio runtime (out of threads or memory?)");
    let fresh = Box::into_raw(Box::new(ProcessRuntime { pid, runtime }));
    // The previous runtime (the parent's, after a fork) is leaked: never dropped.
    CURRENT.store(fresh, Ordering::Release);
    // SAFETY: just created from a Box and never freed.
    unsafe { &*fresh }
}

/// A handle to the process-wide runtime, building it if needed.
///
/// # Examples
///
/// ```
/// let handle = crosslock::runtime::handle();
/// let answer = handle.block_on(async { 6 * 7 });
/// assert_eq!(answer, 42);
/// ```
pub fn handle() -> Handle {
    current().runtime.handle().clone()
}

/// Spawns `future` on the process-wide runtime.
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
    current().runtime.spawn(future)
}

/// Runs blocking work (opening a lane) on the runtime's blocking pool.
pub(crate) fn spawn_blocking(f: impl FnOnce() + Send + 'static) {
    drop(current().runtime.spawn_blocking(f));
}

/// Enters the process runtime's context on this thread (tokio timers and spawns work) until the
/// guard is dropped.
pub(crate) fn enter() -> tokio::runtime::EnterGuard<'static> {
    current().runtime.enter()
}

/// Whether `handle` is the process runtime's (a task of crosslock's own, where the multiplexed
/// connections' drivers run), not an application's.
pub(crate) fn is_process_runtime(handle: &Handle) -> bool {
    handle.id() == current().runtime.handle().id()
}

/// A call [`begin_here`] started on its caller's thread that has to wait.
///
/// The caller goes on waiting for it on its own thread ([`Here::wait`]): the future is polled
/// there, parked between polls while the runtime's threads do the I/O, and its result needs no
/// hand-off from a runtime task (a task finishing, waking the caller's thread, costs a wake-up of
/// its own). Or the caller lets it finish in the background ([`Here::detach`]).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::runtime::{begin_here, Waited};
/// let Err(mut call) = begin_here(async {
///     tokio::time::sleep(Duration::from_millis(20)).await;
///     "slept"
/// }) else {
///     unreachable!("a sleep has to wait")
/// };
/// let Waited::Done(said) = call.wait(Duration::from_secs(5)) else { panic!("no answer") };
/// assert_eq!(said, "slept");
/// ```
pub struct Here<T> {
    inner: HereInner<T>,
}

impl<T> std::fmt::Debug for Here<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            HereInner::Local(_) => "Here(on this thread)",
            HereInner::Task(_) => "Here(a runtime task)",
        })
    }
}

enum HereInner<T> {
    /// Polled by whoever waits for it.
    Local(Pin<Box<dyn Future<Output = T> + Send>>),
    /// Begun from inside the runtime, where no thread may block on a future: a runtime task,
    /// whose result comes through a channel.
    Task(std::sync::mpsc::Receiver<T>),
}

/// What [`Here::wait`] saw.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::runtime::{begin_here, Waited};
/// let Err(mut call) = begin_here(std::future::pending::<()>()) else { unreachable!() };
/// assert!(matches!(call.wait(Duration::from_millis(10)), Waited::Pending));
/// ```
#[derive(Debug)]
pub enum Waited<T> {
    /// The call is done.
    Done(T),
    /// Not yet, within the limit.
    Pending,
    /// It can never be done: its runtime task was dropped (the runtime is shutting down).
    Lost,
}

impl<T: Send + 'static> Here<T> {
    /// Waits for the call at most `limit`, polling it on this thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use crosslock::runtime::{begin_here, Waited};
    /// let Err(mut call) = begin_here(async {
    ///     tokio::time::sleep(Duration::from_millis(200)).await;
    /// }) else {
    ///     unreachable!()
    /// };
    /// // Not within 10 ms; it goes on, and is done within the next 5 s.
    /// assert!(matches!(call.wait(Duration::from_millis(10)), Waited::Pending));
    /// assert!(matches!(call.wait(Duration::from_secs(5)), Waited::Done(())));
    /// ```
    ///
    /// # Panics
    ///
    /// From inside an asynchronous context, as [`block_on`] does.
    pub fn wait(&mut self, limit: Duration) -> Waited<T> {
        match &mut self.inner {
            HereInner::Local(future) => {
                // The timer is made inside `block_on`, in the runtime's context.
                let waited = current()
                    .runtime
                    .block_on(async { tokio::time::timeout(limit, future.as_mut()).await });
                match waited {
                    Ok(value) => Waited::Done(value),
                    Err(_) => Waited::Pending,
                }
            }
            HereInner::Task(result) => match result.recv_timeout(limit) {
                Ok(value) => Waited::Done(value),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Waited::Pending,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Waited::Lost,
            },
        }
    }

    /// Lets the call finish as a runtime task; its result is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let Err(call) = crosslock::runtime::begin_here(async move {
    ///     tokio::time::sleep(Duration::from_millis(20)).await;
    ///     tx.send("finished in the background").unwrap();
    /// }) else {
    ///     unreachable!()
    /// };
    /// call.detach();
    /// assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "finished in the background");
    /// ```
    pub fn detach(self) {
        if let HereInner::Local(future) = self.inner {
            drop(spawn(future));
        }
    }
}

/// Starts `future` on the calling thread, for a caller that is going to block until it is done
/// anyway (a sync binding method): polls it once there and, if it has to wait, hands it back to
/// be waited for on this thread ([`Here::wait`]) or let go to finish on the runtime
/// ([`Here::detach`]).
///
/// During that first poll the future's Redis scripts go over *lanes*, blocking connections used
/// from this thread, so an uncontended acquire or release makes its round trip without waking any
/// runtime thread (a hand-off costs several context switches per call). Results, errors and
/// cancel safety are those of the same future spawned. The first poll blocks for at most one
/// round trip per script it runs (each bounded by the client's response timeout) and does not
/// return early for signals.
///
/// From inside the runtime (a runtime worker or a thread in `block_on`) it only spawns, and the
/// [`Here`] waits for that task: a runtime thread must never block on a future.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::runtime::{begin_here, Waited};
/// let answer = match begin_here(async { 6 * 7 }) {
///     Ok(answer) => answer,
///     Err(mut call) => loop {
///         if let Waited::Done(answer) = call.wait(Duration::from_millis(50)) {
///             break answer;
///         }
///     },
/// };
/// assert_eq!(answer, 42);
/// ```
pub fn begin_here<F>(future: F) -> std::result::Result<F::Output, Here<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if Handle::try_current().is_ok() {
        let (sender, result) = std::sync::mpsc::sync_channel(1);
        drop(spawn(async move {
            let _ = sender.send(future.await);
        }));
        return Err(Here {
            inner: HereInner::Task(result),
        });
    }
    let mut future: Pin<Box<dyn Future<Output = F::Output> + Send>> = Box::pin(future);
    let polled = {
        let _entered = current().runtime.enter();
        let mut cx = Context::from_waker(Waker::noop());
        crate::lane::with_lanes(|| future.as_mut().poll(&mut cx))
    };
    match polled {
        Poll::Ready(value) => Ok(value),
        // The next poll registers the waiting thread's waker wherever the future waits.
        Poll::Pending => Err(Here {
            inner: HereInner::Local(future),
        }),
    }
}

/// Runs `future` to completion on the process-wide runtime, blocking the calling thread.
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
    current().runtime.block_on(future)
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
    let _ = current();
}
