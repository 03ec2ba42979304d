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

//!
//! This file holds the host API ([`Watcher`], [`EventLoop`], [`Readable`]) and each loop's table
//! of lanes; one lane and its requests are in [`super::loop_lane`], the application runtime's
//! loop in [`super::app_runtime`], the thread-locals that name the loop being polled in
//! [`super::ambient`].

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::transport::lane::ambient;
use crate::transport::lane::app_runtime::application_loop;
use crate::transport::lane::loop_lane::{LoopLane, Request};
use crate::transport::lane::{LanePool, Parked};
use crate::util::lock;

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
    /// `false` once the loop knows that it can never watch a socket (a [`Watcher::watch`] that
    /// fails only for one socket need not say so): no lane is then opened for it, and its calls
    /// take the multiplexed connection. Asked before every lane is opened; `true` by default.
    fn can_watch(&self) -> bool {
        true
    }
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

/// A loop's side of its lanes: how it watches their sockets, and which it has.
pub(crate) struct LoopInner {
    pub(super) watcher: Box<dyn Watcher>,
    /// One lane per node (by [`LanePool::id`]).
    lanes: Mutex<Vec<(u64, Arc<LoopLane>)>>,
    /// Connections opened in the background for this loop, not yet taken into use.
    opened: Mutex<Vec<Opened>>,
}

/// A lane connection opened for a loop, to the node of the pool [`LanePool::id`] names.
struct Opened {
    id: u64,
    parked: Arc<Parked>,
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
        crate::runtime::entered(|| ambient::with_event_loop(&self.inner, || future.poll(cx)))
    }
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop").finish_non_exhaustive()
    }
}

/// Sends the command `build` makes over the current event loop's lane to the node of `lanes`;
/// `None` when the thread is not polling for an event loop or no lane is to be had (the caller
/// takes the usual path, and `build` is not called: most calls are not on a loop).
pub(crate) fn send(lanes: &LanePool, build: impl FnOnce() -> redis::Cmd) -> Option<Request> {
    let event_loop = ambient::event_loop(application_loop)?;
    if lanes.has_overdue() || !lanes.in_this_process() || !event_loop.watcher.can_watch() {
        return None;
    }
    let lane = event_loop.lane(lanes)?;
    lane.send(&build())
}

impl LoopInner {
    pub(super) fn new(watcher: Box<dyn Watcher>) -> Arc<Self> {
        Arc::new(LoopInner {
            watcher,
            lanes: Mutex::new(Vec::new()),
            opened: Mutex::new(Vec::new()),
        })
    }

    fn lane(self: &Arc<Self>, lanes: &LanePool) -> Option<Arc<LoopLane>> {
        let mut all = lock(&self.lanes);
        let gone: Vec<Arc<LoopLane>> = all
            .iter()
            .filter(|(_, lane)| lane.pool_gone())
            .map(|(_, lane)| lane.clone())
            .collect();
        all.retain(|(_, lane)| !lane.is_retired() && !lane.pool_gone());
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
        let lane = LoopLane::new(socket, lanes, Arc::downgrade(self));
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
    pub(super) lane: Arc<LoopLane>,
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
