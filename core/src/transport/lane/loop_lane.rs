//! One event loop's lane to one node: a non-blocking connection whose requests are written on
//! the loop's thread and whose replies [`LoopLane::ready`] completes there (see
//! [`super::event_loop`]), and the thread that reads a retired lane's overdue replies to the end.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};

use crate::transport::lane::event_loop::LoopInner;
use crate::transport::lane::{LanePool, Socket, Trip};
use crate::util::lock;

/// The most requests in flight on one loop lane; beyond it calls take the usual path. Small
/// enough that their bytes always fit a socket's send buffer, so a write never blocks the loop.
const MAX_IN_FLIGHT: usize = 32;

/// A loop's lane to one node (see the module docs).
pub(crate) struct LoopLane {
    state: Mutex<LaneState>,
    retired: AtomicBool,
    /// The node's pool ([`LanePool::alive`]): gone after the client closed or the master moved.
    pool: Weak<()>,
    event_loop: Weak<LoopInner>,
    overdue: Arc<crate::transport::lane::Overdue>,
    open: Arc<std::sync::atomic::AtomicUsize>,
    response_timeout: Duration,
}

struct LaneState {
    /// `None` once retired (the socket went to the thread that reads it to the end).
    socket: Option<Socket>,
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
    /// A lane of `event_loop` over `socket` (non-blocking, opened for `lanes`' node).
    pub(super) fn new(socket: Socket, lanes: &LanePool, event_loop: Weak<LoopInner>) -> Arc<Self> {
        Arc::new(LoopLane {
            state: Mutex::new(LaneState {
                socket: Some(socket),
                buf: Vec::with_capacity(4096),
                pending: VecDeque::new(),
                used: Instant::now(),
            }),
            retired: AtomicBool::new(false),
            pool: lanes.alive(),
            event_loop,
            overdue: lanes.overdue(),
            open: lanes.open_count(),
            response_timeout: lanes.response_timeout(),
        })
    }

    /// Whether the lane left its loop ([`LoopLane::retire`]).
    pub(super) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Whether the node's pool is gone (the client closed, or the master moved).
    pub(super) fn pool_gone(&self) -> bool {
        self.pool.strong_count() == 0
    }

    /// The loop the lane belongs to, while it lives.
    pub(super) fn event_loop(&self) -> Option<Arc<LoopInner>> {
        self.event_loop.upgrade()
    }

    fn state(&self) -> MutexGuard<'_, LaneState> {
        lock(&self.state)
    }

    pub(super) fn reusable(&self) -> bool {
        let state = self.state();
        let Some(socket) = &state.socket else {
            return false;
        };
        if !state.pending.is_empty() {
            return true;
        }
        state.used.elapsed() < crate::transport::lane::FRESH && socket.still_open()
    }

    pub(super) fn send(self: &Arc<Self>, cmd: &redis::Cmd) -> Option<Request> {
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
    pub(super) fn ready(&self) -> bool {
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
    socket: Option<Socket>,
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
    mut socket: Socket,
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
    socket: &mut Socket,
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
