//! Event-loop lanes: a binding's event loop (an asyncio loop) makes the round trip itself.
//!
//! An event loop cannot block for a reply, but it already waits for sockets. A binding that
//! polls core futures on its loop's thread ([`EventLoop::poll`]) lets core's
//! [`Conn::eval`](crate::transport::Conn::eval) send a script over a non-blocking connection
//! owned by that loop: the request is written on the loop's thread, the loop watches the socket
//! (the binding's [`Watcher`], e.g. `loop.add_reader`), and [`Readable::ready`] parses the reply
//! there and wakes the waiting future, which the loop polls again. An uncontended call then costs
//! the loop one wake-up for the reply, as a plain asyncio client does, instead of a hand-off to a
//! runtime thread and back. Anything that waits on the runtime (a busy lock's wait loop, a timer)
//! wakes the loop through the binding's own cross-thread queue, as before.
//!
//! A Rust program's own tokio runtime (`#[tokio::main]`) is such a loop too: a call polled by one
//! of its tasks sends over a lane of that thread's application loop, whose sockets that runtime's
//! reactor watches (a small task per socket that calls [`Readable::ready`]), so the reply wakes
//! the caller on its own runtime, as the multiplexed connection's driver on crosslock's runtime
//! would otherwise have to.
//!
//! It keeps the promises of [`super`]: same scripts and bookkeeping; only lanes used within
//! the last half second are reused, checked for a close first; and **a request whose reply is
//! overdue is never overtaken**: when its caller stops waiting (the response timeout, a cancel)
//! the lane is retired from the loop and a thread reads it to the end (every reply still due, or
//! the server's close), holding back every command to that node until then (within the response
//! timeout, as [`crate::transport::lane`] explains), whether or not the loop ever runs again.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::transport::lane::{Lanes, Trip};
use crate::util::lock;

/// The most requests in flight on one loop lane; beyond it calls take the usual path. Small
/// enough that their bytes always fit a socket's send buffer, so a write never blocks the loop.
const MAX_IN_FLIGHT: usize = 32;

/// How a binding's event loop watches a socket for core.
///
/// # Examples
///
/// ```
/// use std::os::fd::RawFd;
/// use crosslock::host::{Readable, Watcher};
///
/// struct Log;
/// impl Watcher for Log {
///     fn watch(&self, fd: RawFd, _ready: Readable) -> bool {
///         println!("call ready() on the loop thread whenever {fd} is readable");
///         true
///     }
///     fn unwatch(&self, fd: RawFd, _done: Box<dyn FnOnce() + Send>) {
///         println!("stop watching {fd}, then run done() on the loop thread");
///     }
/// }
/// ```
pub trait Watcher: Send + Sync + 'static {
    /// From now on, call `ready.ready()` on the loop's thread whenever `fd` is readable,
    /// level-triggered (again on every turn while unread data remains, as `epoll` without
    /// `EPOLLET`, libuv's `uv_poll` and asyncio's `add_reader` do: `ready` stops reading at a
    /// short read); `false` if the loop cannot (the lane is then not used). Called on the loop's
    /// thread, from inside [`EventLoop::poll`].
    fn watch(&self, fd: RawFd, ready: Readable) -> bool;
    /// Stop watching `fd`, then run `done` on the loop's thread (it closes `fd`). May be called
    /// from any thread.
    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>);
}

/// A binding's event loop, on whose thread core futures are polled (see [`EventLoop::poll`]).
///
/// # Examples
///
/// ```
/// use std::os::fd::RawFd;
/// use crosslock::host::{EventLoop, Readable, Watcher};
///
/// struct Never;
/// impl Watcher for Never {
///     fn watch(&self, _fd: RawFd, _ready: Readable) -> bool { false }
///     fn unwatch(&self, _fd: RawFd, done: Box<dyn FnOnce() + Send>) { done() }
/// }
/// let event_loop = EventLoop::new(Never);
/// let mut future = std::pin::pin!(async { 6 * 7 });
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// assert_eq!(event_loop.poll(future.as_mut(), &mut cx), std::task::Poll::Ready(42));
/// ```
pub struct EventLoop {
    inner: Arc<LoopInner>,
}

struct LoopInner {
    watcher: Box<dyn Watcher>,
    /// One lane per node (by [`Lanes::id`]).
    lanes: Mutex<Vec<(u64, Arc<LoopLane>)>>,
    /// Connections opened in the background for this loop, not yet taken into use.
    opened: Mutex<Vec<Opened>>,
}

/// A lane connection opened for a loop, to the node of the pool [`Lanes::id`] names.
struct Opened {
    id: u64,
    parked: Arc<crate::transport::lane::Parked>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<LoopInner>>> = const { RefCell::new(None) };
}

impl EventLoop {
    /// An event loop that watches sockets through `watcher`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::RawFd;
    /// use crosslock::host::{EventLoop, Readable, Watcher};
    ///
    /// struct Never;
    /// impl Watcher for Never {
    ///     fn watch(&self, _fd: RawFd, _ready: Readable) -> bool { false }
    ///     fn unwatch(&self, _fd: RawFd, done: Box<dyn FnOnce() + Send>) { done() }
    /// }
    /// let _event_loop = EventLoop::new(Never);
    /// ```
    pub fn new(watcher: impl Watcher) -> Self {
        EventLoop {
            inner: LoopInner::new(Box::new(watcher)),
        }
    }

    /// Polls `future` on this (the loop's) thread, inside the process runtime's context, letting
    /// its Redis scripts go over this loop's lanes. Wakers registered meanwhile may be woken from
    /// any thread; the binding polls again on the loop's thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::RawFd;
    /// use std::task::{Context, Poll, Waker};
    /// use crosslock::host::{EventLoop, Readable, Watcher};
    ///
    /// struct Never;
    /// impl Watcher for Never {
    ///     fn watch(&self, _fd: RawFd, _ready: Readable) -> bool { false }
    ///     fn unwatch(&self, _fd: RawFd, done: Box<dyn FnOnce() + Send>) { done() }
    /// }
    /// let event_loop = EventLoop::new(Never);
    /// let mut future = std::pin::pin!(async { "done" });
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert_eq!(event_loop.poll(future.as_mut(), &mut cx), Poll::Ready("done"));
    /// ```
    pub fn poll<F: Future + ?Sized>(
        &self,
        future: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        struct Reset(Option<Arc<LoopInner>>);
        impl Drop for Reset {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        crate::runtime::entered(|| {
            let _reset = Reset(CURRENT.with(|c| c.borrow_mut().replace(self.inner.clone())));
            future.poll(cx)
        })
    }
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop").finish_non_exhaustive()
    }
}

/// Whether a call polled now may go over an event loop's lane (see [`send`]): polled for a
/// binding's loop, or by a task of an application's own tokio runtime.
pub(crate) fn polled_by_a_loop() -> bool {
    if crate::transport::lane::is_off() {
        return false;
    }
    CURRENT.with(|c| c.borrow().is_some())
        || tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| !crate::runtime::is_process_runtime(&runtime))
}

/// Sends the command `build` makes over the current event loop's lane to the node of `lanes`;
/// `None` when the thread is not polling for an event loop or no lane is to be had (the caller
/// takes the usual path, and `build` is not called: most calls are not on a loop).
pub(crate) fn send(lanes: &Lanes, build: impl FnOnce() -> redis::Cmd) -> Option<Request> {
    if crate::transport::lane::is_off() {
        return None;
    }
    let event_loop = CURRENT
        .with(|c| c.borrow().clone())
        .or_else(application_loop)?;
    if lanes.has_overdue() || !lanes.in_this_process() {
        return None;
    }
    let lane = event_loop.lane(lanes)?;
    lane.send(&build())
}

impl LoopInner {
    fn new(watcher: Box<dyn Watcher>) -> Arc<Self> {
        Arc::new(LoopInner {
            watcher,
            lanes: Mutex::new(Vec::new()),
            opened: Mutex::new(Vec::new()),
        })
    }

    fn lane(self: &Arc<Self>, lanes: &Lanes) -> Option<Arc<LoopLane>> {
        let mut all = lock(&self.lanes);
        let gone: Vec<Arc<LoopLane>> = all
            .iter()
            .filter(|(_, lane)| lane.pool.strong_count() == 0)
            .map(|(_, lane)| lane.clone())
            .collect();
        all.retain(|(_, lane)| {
            !lane.retired.load(Ordering::Acquire) && lane.pool.strong_count() != 0
        });
        if !gone.is_empty() {
            drop(all);
            gone.iter().for_each(|lane| lane.retire(None));
            all = lock(&self.lanes);
        }
        if let Some((_, lane)) = all.iter().find(|(id, _)| *id == lanes.id()) {
            if lane.reusable() {
                lanes.note_asked();
                return Some(lane.clone());
            }
            let lane = lane.clone();
            all.retain(|(id, _)| *id != lanes.id());
            drop(all);
            lane.retire(None);
            all = lock(&self.lanes);
        }
        // A lane opened in the background for this node, if one is ready; else start opening
        // one (never on the loop's thread: a server that does not answer must not stall it).
        let ready = {
            let mut opened = lock(&self.opened);
            // Connections closed by their client's closing are forgotten here.
            opened.retain(|o| o.parked.is_parked());
            opened
                .iter()
                .position(|o| o.id == lanes.id())
                .and_then(|at| opened.swap_remove(at).parked.take())
        };
        let Some(socket) = ready else {
            drop(all);
            let event_loop = Arc::downgrade(self);
            let id = lanes.id();
            lanes.open_for_loop(move |parked| {
                if let Some(event_loop) = event_loop.upgrade() {
                    lock(&event_loop.opened).push(Opened { id, parked });
                }
            });
            return None;
        };
        if socket.set_nonblocking(true).is_err() {
            lanes.closed_one();
            return None;
        }
        let fd = socket.fd();
        let lane = Arc::new(LoopLane {
            state: Mutex::new(LaneState {
                socket: Some(socket),
                buf: Vec::with_capacity(4096),
                pending: VecDeque::new(),
                used: Instant::now(),
            }),
            retired: AtomicBool::new(false),
            pool: lanes.alive(),
            event_loop: Arc::downgrade(self),
            overdue: lanes.overdue(),
            open: lanes.open_count(),
            response_timeout: lanes.response_timeout(),
        });
        // Watched before anyone else can see it: a lane retired (by the client closing, say)
        // between being published and being watched would be unwatched before its watch began,
        // and left watched for good.
        drop(all);
        if !self.watcher.watch(fd, Readable { lane: lane.clone() }) {
            lane.retire(None);
            return None;
        }
        lock(&self.lanes).push((lanes.id(), lane.clone()));
        if !lanes.add_loop_lane(Arc::downgrade(&lane)) {
            lane.retire(None); // the client closed meanwhile
            return None;
        }
        Some(lane)
    }
}

thread_local! {
    /// This thread's loop for the application runtime it last polled a call in.
    static APPLICATION: RefCell<Option<(tokio::runtime::Id, Arc<LoopInner>)>> =
        const { RefCell::new(None) };
}

/// The loop whose lanes serve a call polled by an application's own tokio runtime (a task of a
/// Rust program's `#[tokio::main]`): one per thread of that runtime, its sockets watched by that
/// runtime's reactor, their replies read and their callers woken on that runtime. Without it
/// every round trip crosses runtimes twice (the request to the multiplexed connection's driver on
/// a crosslock worker, the reply back to the caller's worker): about twelve context switches a
/// pair instead of two. `None` outside any runtime, and on crosslock's own, whose calls use the
/// multiplexed connection.
fn application_loop() -> Option<Arc<LoopInner>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    if crate::runtime::is_process_runtime(&runtime) {
        return None;
    }
    let id = runtime.id();
    APPLICATION
        .try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if let Some((known, event_loop)) = slot.as_ref()
                && *known == id
            {
                return event_loop.clone();
            }
            let event_loop = LoopInner::new(Box::new(RuntimeWatcher {
                runtime,
                watching: Arc::new(Mutex::new(Vec::new())),
                no_io: AtomicBool::new(false),
            }));
            *slot = Some((id, event_loop.clone()));
            event_loop
        })
        .ok()
}

/// Watches an application loop's sockets with its tokio runtime's reactor: a task per socket.
struct RuntimeWatcher {
    runtime: tokio::runtime::Handle,
    /// The sockets watched, each with its task's [`Stop`]; a task that ends takes its own out.
    watching: Arc<WatchList>,
    /// The runtime has no reactor (built without `enable_io`).
    no_io: AtomicBool,
}

/// The sockets a [`RuntimeWatcher`] watches, each with its task's [`Stop`].
type WatchList = Mutex<Vec<(RawFd, Arc<Stop>)>>;

/// How [`RuntimeWatcher::unwatch`] stops a socket's task and runs what closes the socket after it.
#[derive(Default)]
struct Stop {
    notify: tokio::sync::Notify,
    state: Mutex<StopState>,
}

#[derive(Default)]
struct StopState {
    /// What closes the socket, once the task has let go of it.
    done: Option<Box<dyn FnOnce() + Send>>,
    /// The task has let go of the socket (it ended, or its runtime dropped it).
    finished: bool,
}

impl Watcher for RuntimeWatcher {
    fn watch(&self, fd: RawFd, ready: Readable) -> bool {
        let Some(event_loop) = ready.lane.event_loop.upgrade() else {
            return false;
        };
        if self.no_io.load(Ordering::Relaxed) {
            return false;
        }
        // The reactor watches a descriptor of its own (a duplicate of the lane's), so that its
        // registration can never outlive the descriptor it names, whatever closes first.
        // SAFETY: `fd` is the lane's socket, open for the length of this call.
        let Ok(own) = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
        else {
            return false;
        };
        let _entered = self.runtime.enter();
        // A runtime built without `enable_io` has no reactor: tokio panics instead of saying so,
        // and has no other way to tell. Asked once per loop, without the panic's message;
        // such a runtime's calls take the multiplexed connection.
        let registered = catch_quietly(move || {
            // Deprecated for descriptors the `AsyncFd` does not own; this one owns it.
            #[allow(deprecated)]
            AsyncFd::with_interest(own, Interest::READABLE)
        });
        let socket = match registered {
            Ok(Ok(socket)) => socket,
            Ok(Err(_)) => return false,
            Err(_) => {
                self.no_io.store(true, Ordering::Relaxed);
                return false;
            }
        };
        let stop = Arc::new(Stop::default());
        lock(&self.watching).push((fd, stop.clone()));
        let watching = Watching {
            socket: Some(socket),
            ready,
            stop,
            listed: self.watching.clone(),
            _event_loop: event_loop,
        };
        drop(self.runtime.spawn(watching.run()));
        true
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let stop = {
            let mut watching = lock(&self.watching);
            let at = watching.iter().position(|(watched, _)| *watched == fd);
            at.map(|at| watching.swap_remove(at).1)
        };
        let Some(stop) = stop else {
            return done();
        };
        let mut state = lock(&stop.state);
        if state.finished {
            drop(state);
            return done();
        }
        state.done = Some(done);
        drop(state);
        stop.notify.notify_one();
    }
}

thread_local! {
    /// This thread is in [`catch_quietly`]: a panic here is expected, and caught.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, catching a panic without the panic hook's message: the one way to learn that a
/// runtime has no reactor is to try registering a socket with it, and the default hook would
/// print `thread '…' panicked at …: IO is disabled` on the application's stderr for a question
/// it asked nobody. The first call installs, once per process, a hook that stays silent while
/// its own thread is in here and otherwise hands every panic to the hook it replaced (the
/// application's, or the default). Panics elsewhere are reported as before; a hook the
/// application sets later replaces this one, and then such a probe is reported as any panic.
///
/// In a build with `panic = "abort"` nothing can be caught: a call made from a runtime without
/// an I/O driver ends the process with tokio's message (`Call enable_io on the runtime
/// builder`), at once and every time, which a runtime built with `enable_all()` (as
/// `#[tokio::main]` does) never meets.
fn catch_quietly<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.try_with(std::cell::Cell::get).unwrap_or(false) {
                previous(info);
            }
        }));
    });
    let was = QUIET.replace(true);
    let caught = std::panic::catch_unwind(f);
    QUIET.set(was);
    caught
}

/// The task that watches one lane's socket on an application's runtime. It keeps its loop alive
/// (a lane may serve tasks that moved to other threads of the runtime) until the lane is retired
/// or the runtime shuts down.
struct Watching {
    socket: Option<AsyncFd<std::os::fd::OwnedFd>>,
    ready: Readable,
    stop: Arc<Stop>,
    /// The watcher's list, which names this task's `stop` until it ends.
    listed: Arc<WatchList>,
    _event_loop: Arc<LoopInner>,
}

impl Watching {
    async fn run(self) {
        loop {
            let Some(socket) = self.socket.as_ref() else {
                return;
            };
            tokio::select! {
                biased;
                () = self.stop.notify.notified() => return,
                readable = socket.readable() => match readable {
                    // The reactor is edge-triggered where `Readable::ready` expects level-
                    // triggered readiness (it stops at a short read, without hearing `EAGAIN`).
                    // Clearing after it is still exact: the guard clears only the readiness it
                    // reported, and data arriving after that (read or not) is a new event.
                    Ok(mut guard) => {
                        // A retired lane has nothing left to read. Its task must end here: the
                        // readiness of a socket the server closed is never cleared, and
                        // `readable()` does not yield, so it would spin on this thread for good
                        // and hold up the runtime's shutdown.
                        if !self.ready.lane.ready() {
                            return;
                        }
                        guard.clear_ready();
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        lock(&self.listed).retain(|(_, stop)| !Arc::ptr_eq(stop, &self.stop));
        drop(self.socket.take());
        let done = {
            let mut state = lock(&self.stop.state);
            state.finished = true;
            state.done.take()
        };
        match done {
            Some(done) => done(),
            // Not unwatched: the runtime is shutting down (or lost its reactor). The lane leaves
            // the loop; its unwatch finds the task finished and closes at once.
            None => self.ready.lane.retire(None),
        }
    }
}

/// The handle a [`Watcher`] calls when its socket is readable.
///
/// # Examples
///
/// ```
/// use crosslock::host::Readable;
///
/// // What a binding's loop does when the socket of `ready` is readable (on the loop's thread).
/// fn on_readable(ready: &Readable) {
///     ready.ready();
/// }
/// ```
pub struct Readable {
    lane: Arc<LoopLane>,
}

impl Readable {
    /// Reads what arrived and wakes the futures whose replies it completes. On the loop's
    /// thread; never blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::RawFd;
    /// use crosslock::host::{Readable, Watcher};
    ///
    /// // A watcher hands `ready` to its loop, which calls it whenever `fd` is readable.
    /// struct Loop(std::sync::Mutex<Vec<(RawFd, Readable)>>);
    /// impl Watcher for Loop {
    ///     fn watch(&self, fd: RawFd, ready: Readable) -> bool {
    ///         self.0.lock().unwrap().push((fd, ready));
    ///         true
    ///     }
    ///     fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
    ///         self.0.lock().unwrap().retain(|(f, _)| *f != fd);
    ///         done()
    ///     }
    /// }
    /// fn on_readable(watcher: &Loop, fd: RawFd) {
    ///     for (_, ready) in watcher.0.lock().unwrap().iter().filter(|(f, _)| *f == fd) {
    ///         ready.ready();
    ///     }
    /// }
    /// ```
    pub fn ready(&self) {
        self.lane.ready();
    }
}

impl std::fmt::Debug for Readable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readable").finish_non_exhaustive()
    }
}

pub(crate) struct LoopLane {
    state: Mutex<LaneState>,
    retired: AtomicBool,
    /// The node's pool ([`Lanes::alive`]): gone after the client closed or the master moved.
    pool: Weak<()>,
    event_loop: Weak<LoopInner>,
    overdue: Arc<crate::transport::lane::Overdue>,
    open: Arc<std::sync::atomic::AtomicUsize>,
    response_timeout: Duration,
}

struct LaneState {
    /// `None` once retired (the socket went to the thread that reads it to the end).
    socket: Option<crate::transport::lane::Socket>,
    buf: Vec<u8>,
    pending: VecDeque<Arc<Slot>>,
    used: Instant,
}

/// One request's reply, as the lane and the waiting future share it.
struct Slot {
    state: Mutex<SlotState>,
}

enum SlotState {
    Waiting(Option<Waker>),
    Done(Trip),
    /// Its caller stopped waiting; the reply is owed to nobody (counted in `overdue`).
    Abandoned,
    Taken,
}

/// The reply of a request sent over a loop lane.
pub(crate) struct Request {
    slot: Arc<Slot>,
    lane: Arc<LoopLane>,
}

impl Future for Request {
    type Output = Trip;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Trip> {
        // Polled again (woken) before the loop read the reply: a reply already in the socket
        // counts (a loop kept busy past the response timeout must not turn an answer into a lost
        // one). Never on the first poll, right after sending: a reply is always the loop's to see
        // first, so an awaiting task never completes without the loop turning.
        if matches!(*lock(&self.slot.state), SlotState::Waiting(Some(_))) {
            self.lane.ready();
        }
        let mut state = lock(&self.slot.state);
        match std::mem::replace(&mut *state, SlotState::Taken) {
            SlotState::Done(trip) => Poll::Ready(trip),
            SlotState::Waiting(_) => {
                *state = SlotState::Waiting(Some(cx.waker().clone()));
                Poll::Pending
            }
            other => {
                *state = other;
                Poll::Ready(Trip::NoAnswer)
            }
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        let mut state = lock(&self.slot.state);
        if let SlotState::Waiting(_) = *state {
            *state = SlotState::Abandoned;
            self.lane.overdue.count.fetch_add(1, Ordering::AcqRel);
            drop(state);
            // Nothing may overtake the request now: the lane leaves the loop and a thread reads
            // it to the end.
            self.lane.retire(None);
        }
    }
}

impl LoopLane {
    fn state(&self) -> MutexGuard<'_, LaneState> {
        lock(&self.state)
    }

    fn reusable(&self) -> bool {
        let state = self.state();
        let Some(socket) = &state.socket else {
            return false;
        };
        if !state.pending.is_empty() {
            return true;
        }
        state.used.elapsed() < crate::transport::lane::FRESH && socket.still_open()
    }

    fn send(self: &Arc<Self>, cmd: &redis::Cmd) -> Option<Request> {
        let mut state = self.state();
        if state.pending.len() >= MAX_IN_FLIGHT {
            return None;
        }
        let socket = state.socket.as_mut()?;
        let bytes = cmd.get_packed_command();
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::Waiting(None)),
        });
        let written = write_all_nonblocking(socket, &bytes, self.response_timeout);
        state.used = Instant::now();
        match written {
            Ok(()) => state.pending.push_back(slot.clone()),
            Err(e) => {
                // A write that timed out may leave earlier requests unanswered in a stalled
                // server: read them to the end. Any other failure means the connection is gone.
                let broken = match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => None,
                    kind => Some(kind),
                };
                drop(state);
                self.retire(broken);
                if broken.is_some() {
                    // The connection was gone before the command reached the server whole, so
                    // it cannot run: the caller takes the usual path instead of hearing an
                    // unknown outcome. (After a timed-out write, the response timeout is spent:
                    // the caller hears that Redis did not answer.)
                    return None;
                }
                *lock(&slot.state) = SlotState::Done(Trip::Reply(Err(e.into())));
            }
        }
        Some(Request {
            slot,
            lane: self.clone(),
        })
    }

    /// Reads what arrived and wakes the callers it answers; `false` once the lane is retired
    /// (before this call, or by it: the server closed the connection).
    fn ready(&self) -> bool {
        let mut wake = Vec::new();
        let mut broken = None;
        {
            let mut state = self.state();
            let LaneState {
                socket,
                buf,
                pending,
                ..
            } = &mut *state;
            let Some(socket) = socket.as_mut() else {
                return false;
            };
            let mut chunk = [0u8; 4096];
            loop {
                match socket.read(&mut chunk) {
                    Ok(0) => {
                        broken = Some(io::ErrorKind::ConnectionReset);
                        break;
                    }
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        // A short read emptied the socket: no need to ask again only to hear
                        // `EAGAIN` (a system call per reply). The loop watches it level-
                        // triggered, so whatever comes later is another readable event.
                        if n < chunk.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        broken = Some(e.kind());
                        break;
                    }
                }
            }
            if let Err(kind) = complete_replies(buf, pending, &self.overdue, &mut wake) {
                broken = Some(kind);
            }
        }
        for waker in wake {
            waker.wake();
        }
        if let Some(kind) = broken {
            self.retire(Some(kind));
            return false;
        }
        true
    }

    /// Takes the lane out of its loop. With `broken`, the connection is gone: every pending
    /// request fails with it. Otherwise a thread reads every reply still due to the end.
    pub(crate) fn retire(&self, broken: Option<io::ErrorKind>) {
        if self.retired.swap(true, Ordering::AcqRel) {
            return;
        }
        let (socket, buf, pending) = {
            let mut state = self.state();
            let socket = state.socket.take();
            (
                socket,
                std::mem::take(&mut state.buf),
                std::mem::take(&mut state.pending),
            )
        };
        let Some(socket) = socket else { return };
        let fd = socket.fd();
        // The loop may still have the descriptor registered: it is closed only after the loop
        // stopped watching it (never reused under the loop's feet); the reads go on a duplicate.
        let reader = socket.try_clone();
        let closing = Closing {
            socket: Some(socket),
            open: self.open.clone(),
        };
        // Dropped unrun (the loop went away first) it closes all the same.
        let close: Box<dyn FnOnce() + Send> = Box::new(move || drop(closing));
        match self.event_loop.upgrade() {
            Some(event_loop) => event_loop.watcher.unwatch(fd, close),
            None => close(),
        }
        match (broken, reader) {
            (None, Ok(reader)) if !pending.is_empty() => {
                let overdue = self.overdue.clone();
                let timeout = self.response_timeout;
                let waiting = pending.clone();
                let drain = move || drain(reader, buf, pending, &overdue, timeout);
                if let Err(e) = std::thread::Builder::new()
                    .name("crosslock-lane".into())
                    .spawn(drain)
                {
                    // No thread to spare: let the node's commands go on rather than hold them
                    // back for good.
                    tracing::warn!(target: "crosslock", "cannot watch an overdue reply: {e}");
                    fail_all(waiting, io::ErrorKind::ConnectionAborted, &self.overdue);
                }
            }
            (broken, _) => fail_all(
                pending,
                broken.unwrap_or(io::ErrorKind::ConnectionReset),
                &self.overdue,
            ),
        }
    }
}

impl Drop for LoopLane {
    fn drop(&mut self) {
        // The loop is gone (its lanes go with it): close, or read what is still due to the end.
        self.retire(None);
    }
}

/// A retired lane's own descriptor, closed (and no longer counted as open) when dropped.
struct Closing {
    socket: Option<crate::transport::lane::Socket>,
    open: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for Closing {
    fn drop(&mut self) {
        drop(self.socket.take());
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads `socket` (blocking) until every request in `pending` has its reply, the server closes
/// the connection or [`crate::transport::lane::ORPHAN_LIMIT`] passes.
fn drain(
    mut socket: crate::transport::lane::Socket,
    mut buf: Vec<u8>,
    mut pending: VecDeque<Arc<Slot>>,
    overdue: &crate::transport::lane::Overdue,
    timeout: Duration,
) {
    let deadline = Instant::now() + crate::transport::lane::ORPHAN_LIMIT;
    let _ = socket.set_nonblocking(false);
    let _ = socket.set_read_timeout(timeout.max(Duration::from_millis(100)));
    let mut chunk = [0u8; 4096];
    let mut wake = Vec::new();
    let mut broken = io::ErrorKind::ConnectionReset;
    while !pending.is_empty() {
        if let Err(kind) = complete_replies(&mut buf, &mut pending, overdue, &mut wake) {
            broken = kind;
            break;
        }
        wake.drain(..).for_each(Waker::wake);
        if pending.is_empty() {
            break;
        }
        match socket.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if Instant::now() >= deadline {
                    socket.shut_down();
                    break;
                }
            }
            Err(e) => {
                broken = e.kind();
                break;
            }
        }
    }
    wake.drain(..).for_each(Waker::wake);
    fail_all(pending, broken, overdue);
}

/// Completes the requests at the front of `pending` with every whole reply in `buf`.
fn complete_replies(
    buf: &mut Vec<u8>,
    pending: &mut VecDeque<Arc<Slot>>,
    overdue: &crate::transport::lane::Overdue,
    wake: &mut Vec<Waker>,
) -> Result<(), io::ErrorKind> {
    let mut at = 0;
    while let Some(len) = crate::transport::lane::resp::frame_len(&buf[at..]) {
        let reply =
            crate::transport::lane::resp::parse(&buf[at..at + len]).and_then(Value::extract_error);
        at += len;
        let Some(slot) = pending.pop_front() else {
            // A reply nobody asked for: the connection cannot be trusted any more.
            return Err(io::ErrorKind::InvalidData);
        };
        finish(&slot, Trip::Reply(reply), overdue, wake);
    }
    buf.drain(..at);
    Ok(())
}

fn finish(
    slot: &Slot,
    trip: Trip,
    overdue: &crate::transport::lane::Overdue,
    wake: &mut Vec<Waker>,
) {
    let mut state = lock(&slot.state);
    match std::mem::replace(&mut *state, SlotState::Taken) {
        SlotState::Waiting(waker) => {
            *state = SlotState::Done(trip);
            wake.extend(waker);
        }
        SlotState::Abandoned => overdue.settle_one(),
        other => *state = other,
    }
}

fn fail_all(
    pending: VecDeque<Arc<Slot>>,
    kind: io::ErrorKind,
    overdue: &crate::transport::lane::Overdue,
) {
    let mut wake = Vec::new();
    for slot in pending {
        let error: RedisResult<Value> = Err(io::Error::from(kind).into());
        finish(&slot, Trip::Reply(error), overdue, &mut wake);
    }
    wake.into_iter().for_each(Waker::wake);
}

/// Writes all of `bytes` to a non-blocking socket; in the unlikely case its send buffer is full,
/// the rest is written blocking (bounded by `timeout`).
fn write_all_nonblocking(
    socket: &mut crate::transport::lane::Socket,
    mut bytes: &[u8],
    timeout: Duration,
) -> io::Result<()> {
    let mut blocking = false;
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && !blocking => {
                socket.set_nonblocking(false)?;
                socket.set_write_timeout(timeout)?;
                blocking = true;
            }
            Err(e) => return Err(e),
        }
    }
    if blocking {
        socket.set_nonblocking(true)?;
    }
    Ok(())
}
