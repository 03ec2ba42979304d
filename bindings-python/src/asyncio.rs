//! The asyncio bridge: core futures as `asyncio.Future`s, completed on their event loop's thread.
//!
//! Each event loop gets one [`Completions`] queue (created on first use, kept in a
//! `WeakKeyDictionary` keyed by the loop, so it goes when the loop goes): a socket pair whose read
//! end the loop watches with `loop.add_reader`, and a list of finished results. A call creates the
//! loop's future, spawns its core future on core's runtime and returns. When the core future ends,
//! the runtime thread pushes the result on the queue and, if the queue was empty, writes one byte
//! to the socket; it never takes the GIL and never waits for the loop. The loop, woken by the byte,
//! drains the queue on its own thread: each result is converted there and set on its future,
//! unless the future is already done (cancelled), in which case the result is dropped unconverted.
//!
//! So a call costs one task spawn, one byte written and one loop wake-up (shared by every result
//! that finished meanwhile), and no thread ever waits for the GIL to hand a result over.
//!
//! Cancelling the future while its core future runs aborts the task, which drops the core future
//! on the runtime (core's cancel-safety leaves nothing behind). A result that finishes after the
//! cancel is dropped unconverted; one already set when the awaiting task is cancelled is the Python
//! layer's to abandon. A result that must not be lost either way carries an
//! [`Unclaimed`](crate::runtime::Unclaimed) guard, whose drop undoes it.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyCFunction;

/// Work to run on the loop's thread, with the GIL: set one future's result.
type Completion = Box<dyn FnOnce(Python<'_>) + Send>;

/// One event loop's queue of finished results and the socket pair that wakes it.
struct Queue {
    done: Mutex<Vec<Completion>>,
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
        if first {
            // A full socket buffer (WouldBlock) means a wake-up is pending anyway.
            let _ = (&self.wake).write(&[1]);
        }
    }

    /// Runs every queued completion. On the loop's thread, when the read end is readable.
    fn drain(&self, py: Python<'_>) {
        // The bytes first, then the list: a push between the two either is in the list taken
        // below or wrote a byte that wakes the loop again (never a result left without a wake-up).
        let mut bytes = [0u8; 64];
        while let Ok(n) = (&self.woken).read(&mut bytes) {
            if n < bytes.len() {
                break;
            }
        }
        let done = std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()));
        for completion in done {
            completion(py);
        }
    }
}

/// A loop's queue as the loop sees it: the object `loop.add_reader` calls.
#[pyclass(module = "crosslock._native", name = "_Completions", frozen)]
struct Completions {
    queue: Arc<Queue>,
}

#[pymethods]
impl Completions {
    fn __call__(&self, py: Python<'_>) {
        self.queue.drain(py);
    }
}

/// `asyncio.get_running_loop` and the registry of every loop's queue.
struct Asyncio {
    get_running_loop: Py<PyAny>,
    queues: Py<PyAny>,
}

static ASYNCIO: PyOnceLock<Asyncio> = PyOnceLock::new();

fn asyncio(py: Python<'_>) -> PyResult<&Asyncio> {
    ASYNCIO.get_or_try_init(py, || {
        Ok(Asyncio {
            get_running_loop: py.import("asyncio")?.getattr("get_running_loop")?.unbind(),
            queues: py
                .import("weakref")?
                .getattr("WeakKeyDictionary")?
                .call0()?
                .unbind(),
        })
    })
}

/// The running loop and its queue (created and registered with the loop on first use).
fn running<'py>(py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Arc<Queue>)> {
    let asyncio = asyncio(py)?;
    let event_loop = asyncio.get_running_loop.bind(py).call0()?;
    let queues = asyncio.queues.bind(py);
    if let Ok(known) = queues
        .call_method1("get", (&event_loop,))?
        .cast::<Completions>()
    {
        return Ok((event_loop, known.get().queue.clone()));
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
    queues.set_item(&event_loop, &completions)?;
    Ok((event_loop, queue))
}

/// Delivers one result to its future exactly once: with the value, or, if the task ends without
/// one (it panicked), with a `RuntimeError`, so no awaiter is left waiting forever.
struct Delivery {
    target: Option<(Py<PyAny>, Arc<Queue>)>,
}

impl Delivery {
    fn deliver<T>(mut self, result: T)
    where
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        if let Some((future, queue)) = self.target.take() {
            queue.push(Box::new(move |py| {
                settle(py, future, |py| result.into_bound_py_any(py))
            }));
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some((future, queue)) = self.target.take() {
            // Also reached when the task is aborted because the future was cancelled: `settle`
            // then finds the future done and does nothing.
            queue.push(Box::new(move |py| {
                let err = PyRuntimeError::new_err(
                    "crosslock: the operation ended without a result (a panic in the native \
                     module, or the process is shutting down)",
                );
                settle(py, future, |_| Err(err))
            }));
        }
    }
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

/// Returns an `asyncio.Future` of `future`'s output, run on core's runtime and converted on the
/// running loop's thread. Must be called with a running event loop (from a coroutine).
pub(crate) fn future<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future + Send + 'static,
    F::Output: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let (event_loop, queue) = running(py)?;
    let awaited = event_loop.call_method0("create_future")?;
    let delivery = Delivery {
        target: Some((awaited.clone().unbind(), queue)),
    };
    let task = crosslock::runtime::spawn(async move {
        let output = future.await;
        delivery.deliver(output);
    });
    let abort = task.abort_handle();
    let on_done = PyCFunction::new_closure(py, None, None, move |args, _| -> PyResult<()> {
        // Cancelled (not completed): drop the core future now, on the runtime.
        if args.get_item(0)?.call_method0("cancelled")?.is_truthy()? {
            abort.abort();
        }
        Ok(())
    })?;
    awaited.call_method1("add_done_callback", (on_done,))?;
    Ok(awaited)
}
