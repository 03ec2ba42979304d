//! The ambient state that routes a call to a lane: every thread-local that says, while a call's
//! future is polled, whether its scripts may go over a lane and whose. Each is set for the length
//! of one poll by whoever polls (a setter here puts the value it found back when it returns, on
//! a panic too) and read by the transport when it chooses where a script goes.
//!
//! | local | what it means | who sets it (fn, file) | who reads it (fn, file) |
//! |---|---|---|---|
//! | `ON_LANE` | this thread is a blocking caller's own, polling its call once: a script may go over a blocking lane | [`with_lanes`], from `begin_here` (`host/mod.rs`) | [`on_lane`], from `Conn::trip_on_lane` (`transport/script_run.rs`) and `Conn::node_pool` (`transport/cluster/map.rs`) |
//! | `OFF` | the poll is a fan-out's: no lane at all, neither a blocking one nor an event loop's | [`no_lane`], from `at_most_in_flight` (`transport/fanout.rs`), every fan-out's one path | [`on_lane`], [`event_loop`] and [`polled_by_a_loop`] (here) |
//! | `DEADLINE` | the wait limit of the acquire attempt being polled: a blocking lane is not used when it is nearer than the response timeout | [`with_deadline`], from `InFlight::poll` (`engine/wait/in_flight.rs`) | [`deadline`], from `LanePool::eval` (`lane/blocking.rs`) |
//! | `CURRENT` | the binding's event loop this thread polls for | [`with_event_loop`], from `EventLoop::poll` (`lane/event_loop.rs`) | [`event_loop`], from `send` (`lane/event_loop.rs`); [`polled_by_a_loop`], from `Conn::node_pool` (`transport/cluster/map.rs`) |
//! | `APPLICATION` | this thread's loop for the application runtime (a Rust program's own tokio runtime) it last polled a call in | [`application_loop`], from `application_loop` (`lane/app_runtime.rs`), which makes the loop on a thread's first call | [`application_loop`] (the same call: it returns the loop it kept) |
//! | `QUIET` | this thread is probing a runtime for a reactor: a panic here is expected, and caught | [`quietly`], from `catch_quietly` (`lane/app_runtime.rs`) | [`is_quiet`], from the panic hook `catch_quietly` installs (`lane/app_runtime.rs`) |
//!
//! Whether a caller may take a lane at all is also the client's [`Lanes`](crate::Lanes) setting,
//! which the transport checks beside these (`Conn::trip_on_lane`, `Conn::node_pool`).
//!
//! The crate's other thread- and task-locals do not route calls, and live beside their users:
//! `owner.rs`'s `SCOPED` and `THREAD_OWNER` (who the current caller is), `runtime.rs`'s `CACHED`
//! (the process runtime's handle and pid) and `engine/mod.rs`'s `STATE` (the back-off jitter's
//! generator). The replica acks of an acquire attempt ride no local: they go explicitly, into the
//! `ReplicaAcks` its request carries (`transport/replicas.rs`).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::transport::lane::event_loop::LoopInner;

thread_local! {
    static ON_LANE: Cell<bool> = const { Cell::new(false) };
    static OFF: Cell<bool> = const { Cell::new(false) };
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static CURRENT: RefCell<Option<Arc<LoopInner>>> = const { RefCell::new(None) };
    static APPLICATION: RefCell<Option<(tokio::runtime::Id, Arc<LoopInner>)>> =
        const { RefCell::new(None) };
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with `local` set to `value`, restoring what it was afterwards (on a panic too).
fn with_cell<T: Copy + 'static, R>(
    local: &'static std::thread::LocalKey<Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Reset<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<T>>, T);
    impl<T: Copy + 'static> Drop for Reset<T> {
        fn drop(&mut self) {
            self.0.with(|c| c.set(self.1));
        }
    }
    let _reset = Reset(local, local.with(|c| c.replace(value)));
    f()
}

/// Runs `f` with this thread marked as one that may block on lanes (a blocking caller's own
/// thread, polling its call once).
pub(crate) fn with_lanes<R>(f: impl FnOnce() -> R) -> R {
    with_cell(&ON_LANE, true, f)
}

/// Whether the current thread is inside [`with_lanes`] and the poll is not inside [`no_lane`].
pub(crate) fn on_lane() -> bool {
    ON_LANE.with(Cell::get) && !is_off()
}

/// Runs `f` (one synchronous poll of an acquire attempt) with its wait limit: a blocking lane
/// cannot be raced against the deadline the way an awaited reply is, so an attempt whose limit is
/// shorter than the response timeout takes the usual path (see [`deadline`]).
pub(crate) fn with_deadline<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    with_cell(&DEADLINE, deadline, f)
}

/// The wait limit of the acquire attempt being polled on this thread, if any.
pub(crate) fn deadline() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// Polls `future` with no lane for its calls, neither this thread's (a blocking caller's) nor
/// its event loop's: for a fan-out (many calls awaited together, such as a multi-lock's parts),
/// whose first poll would otherwise make one blocking round trip per call, one after another,
/// and which the multiplexed connection pipelines better than a loop's lane (whose replies come
/// back one loop callback each). [`crate::transport::fanout::at_most_in_flight`] polls its parts this way.
pub(crate) fn no_lane<F: Future>(future: F) -> NoLane<F> {
    NoLane {
        future: Box::pin(future),
    }
}

/// The future [`no_lane`] returns.
pub(crate) struct NoLane<F> {
    future: Pin<Box<F>>,
}

impl<F: Future> Future for NoLane<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        with_cell(&OFF, true, || self.future.as_mut().poll(cx))
    }
}

/// Whether the current poll is inside [`no_lane`]: its calls take no lane.
fn is_off() -> bool {
    OFF.with(Cell::get)
}

/// Runs `f` (a poll of a call) with `event_loop` as the loop this thread polls for.
pub(crate) fn with_event_loop<R>(event_loop: &Arc<LoopInner>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Arc<LoopInner>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _reset = Reset(CURRENT.with(|c| c.borrow_mut().replace(event_loop.clone())));
    f()
}

/// The event loop whose lane a call polled now may take: the binding's loop this thread polls
/// for, else `application` (the application runtime's loop, made when first asked for); `None`
/// inside [`no_lane`] or when neither is there.
pub(crate) fn event_loop(
    application: impl FnOnce() -> Option<Arc<LoopInner>>,
) -> Option<Arc<LoopInner>> {
    if is_off() {
        return None;
    }
    CURRENT.with(|c| c.borrow().clone()).or_else(application)
}

/// Whether a call polled now may go over an event loop's lane: polled for a binding's loop, or by
/// a task of an application's own tokio runtime; not inside [`no_lane`].
pub(crate) fn polled_by_a_loop() -> bool {
    if is_off() {
        return false;
    }
    CURRENT.with(|c| c.borrow().is_some())
        || tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| !crate::runtime::is_process_runtime(&runtime))
}

/// This thread's loop for the application runtime `id`: the one it made for that runtime before,
/// else the one `make` makes now (kept for the next call). `None` while the thread is exiting.
pub(crate) fn application_loop(
    id: tokio::runtime::Id,
    make: impl FnOnce() -> Arc<LoopInner>,
) -> Option<Arc<LoopInner>> {
    APPLICATION
        .try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if let Some((known, event_loop)) = slot.as_ref()
                && *known == id
            {
                return event_loop.clone();
            }
            let event_loop = make();
            *slot = Some((id, event_loop.clone()));
            event_loop
        })
        .ok()
}

/// Runs `f` with this thread marked as expecting a panic (see [`is_quiet`]).
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    with_cell(&QUIET, true, f)
}

/// Whether this thread is inside [`quietly`] (`false` while the thread is exiting).
pub(crate) fn is_quiet() -> bool {
    QUIET.try_with(Cell::get).unwrap_or(false)
}
