//! The asyncio bridge: core futures as `asyncio.Future`s, run and completed on their event loop's
//! thread.
//!
//! Each event loop gets one [`Completions`] queue (created on first use, kept in a
//! `WeakKeyDictionary` keyed by the loop, so it goes when the loop goes): a socket pair whose read
//! end the loop watches with `loop.add_reader`, and a list of work for the loop's thread. A call
//! creates the loop's future and polls its core future right away, on the loop's thread
//! (`crosslock::host::EventLoop::poll`): its Redis scripts go over the loop's own lane, a
//! non-blocking connection the loop watches with `add_reader` ([`LaneReader`]), so an uncontended
//! call costs the loop one wake-up for its reply and no thread hand-off at all; the awaiting task
//! resumes in that same turn of the loop (see [`FUTURE_TYPE`]). A core future that
//! waits on core's runtime instead (a busy lock's wait loop, a timer) is woken from a runtime
//! thread: the waker pushes a poll of it on the queue and, if the queue was empty, writes one byte
//! to the socket; it never takes the GIL and never waits for the loop. The loop, woken by the
//! byte, drains the queue on its own thread. When the core future ends, its output is converted
//! there and set on the asyncio future, unless that is already done (cancelled), in which case the
//! output is dropped unconverted.
//!
//! Cancelling the asyncio future while its core future runs drops the core future at once, inside
//! `cancel()` (the future is a subclass whose `cancel()` does it, see [`FUTURE_TYPE`]: no turn of
//! the loop is needed). Core's cancel-safety leaves nothing behind, and a request whose reply is
//! still due is read to its end by core before anything else reaches that node. A result already
//! set when the awaiting task is cancelled is the Python layer's to abandon. A result that must not be lost
//! either way carries an [`Unclaimed`](crate::runtime::Unclaimed) guard, whose drop undoes it.

use std::cell::Cell;
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crosslock::host::Ran;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// Work to run on the loop's thread, with the GIL: set one future's result.
type Completion = Box<dyn FnOnce(Python<'_>) + Send>;

/// One event loop's queue of finished results and the socket pair that wakes it.
struct Queue {
    done: Mutex<Vec<Completion>>,
    /// Core's view of the loop: the lanes its calls make their round trips on.
    lanes: OnceLock<crosslock::host::EventLoop>,
    /// Written (one byte) by the thread that makes `done` non-empty.
    wake: UnixStream,
    /// Watched by the loop (`add_reader`); drained before `done` is taken.
    woken: UnixStream,
}

impl Queue {
    fn new() -> std::io::Result<Self> {
        let (wake, woken) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        woken.set_nonblocking(true)?;
        Ok(Queue {
            done: Mutex::new(Vec::new()),
            lanes: OnceLock::new(),
            wake,
            woken,
        })
    }

    /// Queues `completion`; wakes the loop when it is the first since the last drain. Any thread.
    fn push(&self, completion: Completion) {
        let first = {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            done.push(completion);
            done.len() == 1
        };
        // Pushed by the loop's own thread while it drains: the drain runs it before returning.
        // (Pushed by a thread draining another loop's queue: that drain does not run it.)
        if first && DRAINING.with(Cell::get) != std::ptr::from_ref(self) {
            // A full socket buffer (WouldBlock) means a wake-up is pending anyway.
            let _ = (&self.wake).write(&[1]);
        }
    }

    /// Runs every queued completion, on the loop's thread. `woken`: called because the read end
    /// is readable, so the wake-up bytes are read first. A lane's reader drains without reading
    /// them (a system call per reply, nearly always answered `EAGAIN`): a byte left there makes
    /// the loop call the queue once more, which reads it and finds the list empty or not.
    fn drain(&self, py: Python<'_>, woken: bool) {
        // The bytes first, then the list: a push between the two either is in the list taken
        // below or wrote a byte that wakes the loop again (never a result left without a wake-up).
        let mut bytes = [0u8; 64];
        while woken && let Ok(n) = (&self.woken).read(&mut bytes) {
            if n < bytes.len() {
                break;
            }
        }
        let was = DRAINING.with(|d| d.replace(std::ptr::from_ref(self)));
        for _ in 0..DRAIN_ROUNDS {
            let done = std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()));
            if done.is_empty() {
                break;
            }
            for completion in done {
                completion(py);
            }
        }
        DRAINING.with(|d| d.set(was));
        // Work left after the last round (a task that keeps waking itself) waits for the next
        // turn of the loop, like any other.
        if was != std::ptr::from_ref(self)
            && !self
                .done
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
        {
            let _ = (&self.wake).write(&[1]);
        }
    }
}

thread_local! {
    /// The queue this thread is draining, if any: what it pushes there meanwhile is run by that
    /// drain, so it needs no wake-up byte (and no extra turn of the loop). What it pushes on
    /// another loop's queue (a task of a loop on another thread, woken from here) still wakes
    /// that loop.
    static DRAINING: Cell<*const Queue> = const { Cell::new(std::ptr::null()) };
}

/// How many times one drain takes the queue again for work pushed while it ran.
const DRAIN_ROUNDS: usize = 16;

/// A loop's queue as the loop sees it: the object `loop.add_reader` calls.
#[pyclass(module = "crosslock._native", name = "_Completions", frozen)]
struct Completions {
    queue: Arc<Queue>,
}

#[pymethods]
impl Completions {
    fn __call__(&self, py: Python<'_>) {
        self.queue.drain(py, true);
    }
}

/// The `asyncio.Future` subclass a call returns. Its `cancel()` also drops the core future behind
/// it, at once. (A done-callback on a plain future did that before, at the cost of a callback
/// object per call and one more callback scheduled and run by the loop when the call finished.)
///
/// It also keeps the first done-callback added while it is pending (the awaiting task's wake-up)
/// to itself: when crosslock sets the result it runs that callback right away, in the same turn of
/// the loop that read the reply ([`wake_awaiter`]), instead of scheduling it with `call_soon` for
/// the next turn. Cancelled, it schedules it with `call_soon` as a plain future would.
const FUTURE_TYPE: &std::ffi::CStr = cr#"
import asyncio


class Future(asyncio.Future):
    """An asyncio future of a crosslock call; cancelling it cancels the call."""

    __slots__ = ("_crosslock_call", "_crosslock_wakeup")

    def add_done_callback(self, fn, *, context=None):
        if self._crosslock_wakeup is None and not self.done():
            self._crosslock_wakeup = (fn, context)
        else:
            super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn):
        wakeup = self._crosslock_wakeup
        if wakeup is not None and wakeup[0] == fn:
            self._crosslock_wakeup = None
            return 1 + super().remove_done_callback(fn)
        return super().remove_done_callback(fn)

    def cancel(self, msg=None):
        if not super().cancel(msg):
            return False
        self._crosslock_call.cancel()
        wakeup = self._crosslock_wakeup
        if wakeup is not None:
            self._crosslock_wakeup = None
            self.get_loop().call_soon(wakeup[0], self, context=wakeup[1])
        return True
"#;

/// `asyncio.get_running_loop`, the registry of every loop's queue and the future type.
struct Asyncio {
    get_running_loop: Py<PyAny>,
    queues: Py<PyAny>,
    future_type: Py<PyAny>,
}

static ASYNCIO: PyOnceLock<Asyncio> = PyOnceLock::new();

fn asyncio(py: Python<'_>) -> PyResult<&Asyncio> {
    ASYNCIO.get_or_try_init(py, || {
        let future_type = PyModule::from_code(
            py,
            FUTURE_TYPE,
            c"crosslock/_native/asyncio.py",
            c"crosslock._native_asyncio",
        )?
        .getattr("Future")?
        .unbind();
        Ok(Asyncio {
            get_running_loop: py.import("asyncio")?.getattr("get_running_loop")?.unbind(),
            queues: py
                .import("weakref")?
                .getattr("WeakKeyDictionary")?
                .call0()?
                .unbind(),
            future_type,
        })
    })
}

thread_local! {
    /// The loop this thread ran last (a `weakref.ref`) and its queue: a thread runs one loop at a
    /// time, so most calls skip the registry's lookup. Weak both: the loop keeps its queue (and
    /// the queue its lanes) only as long as the loop lives.
    static LAST_LOOP: std::cell::RefCell<Option<(Py<PyAny>, Weak<Queue>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The running loop and its queue (created and registered with the loop on first use).
fn running<'py>(py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Arc<Queue>)> {
    let asyncio = asyncio(py)?;
    let event_loop = asyncio.get_running_loop.bind(py).call0()?;
    let last = LAST_LOOP.with(|last| {
        let last = last.borrow();
        let (weak, queue) = last.as_ref()?;
        weak.bind(py)
            .call0()
            .ok()
            .filter(|l| l.is(&event_loop))
            .and_then(|_| queue.upgrade())
    });
    if let Some(queue) = last {
        return Ok((event_loop, queue));
    }
    let queue = running_queue(py, asyncio, &event_loop)?;
    let weak = py
        .import("weakref")?
        .getattr("ref")?
        .call1((&event_loop,))?
        .unbind();
    LAST_LOOP.with(|last| *last.borrow_mut() = Some((weak, Arc::downgrade(&queue))));
    Ok((event_loop, queue))
}

/// The queue of `event_loop`, from the registry, or made and registered now.
fn running_queue(
    py: Python<'_>,
    asyncio: &Asyncio,
    event_loop: &Bound<'_, PyAny>,
) -> PyResult<Arc<Queue>> {
    let queues = asyncio.queues.bind(py);
    if let Ok(known) = queues
        .call_method1("get", (event_loop,))?
        .cast::<Completions>()
    {
        return Ok(known.get().queue.clone());
    }
    let queue = Arc::new(Queue::new().map_err(|e| {
        PyRuntimeError::new_err(format!(
            "crosslock: cannot create the socket pair that wakes the event loop: {e}"
        ))
    })?);
    let completions = Bound::new(
        py,
        Completions {
            queue: queue.clone(),
        },
    )?;
    event_loop.call_method1("add_reader", (queue.woken.as_raw_fd(), &completions))?;
    queues.set_item(event_loop, &completions)?;
    let watcher = LoopWatcher {
        event_loop: Arc::new(
            py.import("weakref")?
                .getattr("ref")?
                .call1((event_loop,))?
                .unbind(),
        ),
        queue: Arc::downgrade(&queue),
    };
    let _ = queue.lanes.set(crosslock::host::EventLoop::new(watcher));
    Ok(queue)
}

/// Sets `result` on `future` (on the loop's thread), unless the future is already done: then the
/// result is dropped unconverted (its guards, if any, undo it).
fn settle<F>(py: Python<'_>, future: Py<PyAny>, convert: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>>,
{
    let future = future.bind(py);
    match future.call_method0("done").and_then(|d| d.is_truthy()) {
        Ok(false) => {}
        Ok(true) => return,
        Err(e) => return e.write_unraisable(py, Some(future)),
    }
    let outcome = match convert(py) {
        Ok(value) => future.call_method1("set_result", (value,)),
        Err(err) => future.call_method1("set_exception", (err.into_value(py),)),
    };
    if let Err(e) = outcome {
        e.write_unraisable(py, Some(future));
    }
}

/// Runs the done-callback `future` kept for itself (the awaiting task's wake-up, see
/// [`FUTURE_TYPE`]) now that crosslock has set its result: at once when this thread is draining the
/// loop's queue (a reader callback of the loop, so no task is running), else with `call_soon`.
fn wake_awaiter(py: Python<'_>, queue: &Queue, future: &Bound<'_, PyAny>) {
    let wakeup = pyo3::intern!(py, "_crosslock_wakeup");
    let Ok(kept) = future.getattr(wakeup) else {
        return;
    };
    if kept.is_none()
        || !future
            .call_method0("done")
            .is_ok_and(|d| d.is_truthy().unwrap_or(false))
    {
        return;
    }
    let woke = future.setattr(wakeup, py.None()).and_then(|()| {
        let (callback, context): (Bound<'_, PyAny>, Bound<'_, PyAny>) = kept.extract()?;
        if DRAINING.with(Cell::get) == std::ptr::from_ref(queue) {
            if context.is_none() {
                callback.call1((future,))
            } else {
                context.call_method1(pyo3::intern!(py, "run"), (callback, future))
            }
        } else {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item(pyo3::intern!(py, "context"), context)?;
            future
                .call_method0(pyo3::intern!(py, "get_loop"))?
                .call_method(
                    pyo3::intern!(py, "call_soon"),
                    (callback, future),
                    Some(&kwargs),
                )
        }
    });
    if let Err(e) = woke {
        e.write_unraisable(py, Some(future));
    }
}

/// How core watches its lane sockets on this loop: `add_reader`, and `remove_reader` through the
/// queue (so from any thread).
struct LoopWatcher {
    /// A `weakref.ref` to the loop: the loop (through its reader map) keeps the queue alive, so a
    /// strong reference here would keep both forever, lanes and socket pair included. In an
    /// `Arc`, so that `unwatch` can take it along without the GIL: it runs on whichever thread
    /// retires the lane, a runtime thread too, possibly after the interpreter has finalized (at
    /// exit), where attaching to Python panics.
    event_loop: Arc<Py<PyAny>>,
    queue: Weak<Queue>,
}

impl LoopWatcher {
    /// The loop, unless it is gone.
    fn event_loop<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.event_loop
            .bind(py)
            .call0()
            .ok()
            .filter(|l| !l.is_none())
    }
}

impl crosslock::host::Watcher for LoopWatcher {
    fn watch(&self, fd: RawFd, ready: crosslock::host::Readable) -> bool {
        // On the loop's thread, inside a poll, which holds the GIL.
        Python::attach(|py| {
            let reader = LaneReader {
                ready,
                queue: self.queue.clone(),
            };
            let Some(event_loop) = self.event_loop(py) else {
                return false;
            };
            match event_loop.call_method1("add_reader", (fd, reader)) {
                Ok(_) => true,
                Err(e) => {
                    e.write_unraisable(py, None);
                    false
                }
            }
        })
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let Some(queue) = self.queue.upgrade() else {
            return done();
        };
        let event_loop = self.event_loop.clone();
        queue.push(Box::new(move |py| {
            let event_loop = event_loop.bind(py).call0().ok().filter(|l| !l.is_none());
            if let Some(event_loop) = event_loop
                && let Err(e) = event_loop.call_method1("remove_reader", (fd,))
            {
                e.write_unraisable(py, None);
            }
            done();
        }));
    }
}

/// What the loop calls when a lane socket is readable: parse the replies, then poll the futures
/// they woke right away.
#[pyclass(module = "crosslock._native", name = "_LaneReader", frozen)]
struct LaneReader {
    ready: crosslock::host::Readable,
    queue: Weak<Queue>,
}

#[pymethods]
impl LaneReader {
    fn __call__(&self, py: Python<'_>) {
        let Some(queue) = self.queue.upgrade() else {
            return self.ready.ready();
        };
        // The futures the replies wake are pushed on the queue and polled right here.
        let was = DRAINING.with(|d| d.replace(Arc::as_ptr(&queue)));
        self.ready.ready();
        DRAINING.with(|d| d.set(was));
        queue.drain(py, false);
    }
}

/// A core future polled on its event loop's thread: woken from any thread through the queue.
type LoopTask = crosslock::host::LoopTask<PyHost>;

/// A [`LoopTask`]'s loop: its queue, and the asyncio future the task completes.
struct PyHost {
    queue: Arc<Queue>,
    /// The asyncio future, for a poll that panics: it gets a `RuntimeError` rather than never
    /// completing. Let go of on the loop's thread as soon as the core future is done or dropped:
    /// the task itself may be dropped where pyo3 does not know the GIL is held (the destructor of
    /// the future's `_Call`), and a reference dropped there would be released only at pyo3's next
    /// call, keeping the future's result (and the hold a dropped result gives back) alive until
    /// then.
    target: Mutex<Option<Py<PyAny>>>,
}

impl crosslock::host::Schedule for PyHost {
    fn schedule(&self, task: Arc<LoopTask>) {
        self.queue.push(Box::new(move |_| run(&task)));
    }
}

/// Polls `task` once (on the loop's thread); once its future is done, wakes the awaiter, and
/// after a panic fails the asyncio future first.
fn run(task: &Arc<LoopTask>) {
    let host = task.host();
    let ran = task.run(host.queue.lanes.get());
    if ran == Ran::Pending {
        return;
    }
    let target = host.target.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(target) = target else { return };
    Python::attach(|py| {
        if ran == Ran::Panicked {
            settle(py, target.clone_ref(py), |_| {
                Err(PyRuntimeError::new_err(
                    "crosslock: the operation ended without a result (a panic in the native \
                     module)",
                ))
            });
        }
        wake_awaiter(py, &host.queue, target.bind(py));
        drop(target);
    });
}

/// Returns an `asyncio.Future` of `future`'s output: the core future is polled on the running
/// loop's thread (its Redis round trips on the loop's lanes), woken through the loop's queue when
/// it waits on core's runtime, and its output converted and set there. Must be called with a
/// running event loop (from a coroutine).
pub(crate) fn future<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future + Send + 'static,
    F::Output: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let (event_loop, queue) = running(py)?;
    let future_type = asyncio(py)?.future_type.bind(py);
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item(pyo3::intern!(py, "loop"), &event_loop)?;
    let awaited = future_type.call((), Some(&kwargs))?;
    let target = awaited.clone().unbind();
    let task = LoopTask::new(
        async move {
            let output = future.await;
            // On the loop's thread, in a poll: the GIL is this thread's to take.
            Python::attach(|py| settle(py, target, |py| output.into_bound_py_any(py)));
        },
        PyHost {
            queue,
            target: Mutex::new(Some(awaited.clone().unbind())),
        },
    );
    awaited.setattr(
        pyo3::intern!(py, "_crosslock_call"),
        Call { task: task.clone() },
    )?;
    awaited.setattr(pyo3::intern!(py, "_crosslock_wakeup"), py.None())?;
    run(&task);
    Ok(awaited)
}

/// What a call's future cancels (see [`FUTURE_TYPE`]).
#[pyclass(module = "crosslock._native", name = "_Call", frozen)]
struct Call {
    task: Arc<LoopTask>,
}

#[pymethods]
impl Call {
    /// The future was cancelled (not completed): drop the core future now.
    fn cancel(&self) {
        self.task.cancel();
        let target = self
            .task
            .host()
            .target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(target);
    }
}
