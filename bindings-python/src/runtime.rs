//! How Python waits for core: one blocking helper for the sync methods, one bridge for asyncio.
//! Both run the work on core's process runtime (`crosslock::runtime`); this crate never makes a
//! runtime of its own.
//!
//! **Sync** ([`wait`]): the core future is started on the calling thread with the GIL released
//! (`crosslock::host::begin_here`: an uncontended call makes its round trip right there, on a
//! lane, with no thread hand-off); if it has to wait, the calling thread goes on polling it with
//! the GIL released, parked while core's runtime waits for Redis (so the result needs no hand-off
//! from a runtime task), and waking every [`TICK`] to run Python's signal handlers
//! (`py.check_signals()`). When a handler raises (Ctrl-C → `KeyboardInterrupt`), a cancellable
//! operation is cancelled through its token, the helper waits (at most [`CLEANUP_LIMIT`]) for
//! core to finish its give-up cleanup, undoes a success that raced with the signal, and only
//! then re-raises: an interrupted `acquire` leaves no lock, no waiter and no subscription.
//! Waiting on the calling thread (rather than on a helper thread or event loop) keeps the caller's
//! identity, which the Python layer has already turned into an owner number.
//!
//! **asyncio** ([`awaitable`]): an `asyncio.Future` whose core future is polled and completed on
//! its event loop's thread ([`crate::asyncio`]), making its round trips on the loop's own lane and
//! woken through the loop's completion queue when it waits on core's runtime.
//! Cancelling the asyncio future while the core future still runs drops the core future, and
//! core's cancel-safety leaves nothing behind. A cancel that comes *after* the core future
//! finished is another matter: the bridge then drops the finished result unconverted, and asyncio
//! itself drops a result that arrives for a task cancelled before it resumed. A result that must
//! not be lost that way (a won hold) carries an [`Unclaimed`] guard: whoever drops it unclaimed
//! runs its undo.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::time::Duration;

use crosslock::CancellationToken;
use crosslock::host::{Here, Waited};
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::error::to_py_err;

/// How often a blocked thread wakes to let Python run signal handlers.
const TICK: Duration = Duration::from_millis(50);

/// How long an interrupted operation may take to clean up before the signal is re-raised anyway.
const CLEANUP_LIMIT: Duration = Duration::from_secs(2);

/// A boxed future that undoes a result (for instance releases a lock acquired too late).
pub(crate) type Undo<T> = Box<dyn FnOnce(T) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// What to do with an operation when a signal handler raises while the caller waits for it.
pub(crate) enum OnSignal<T> {
    /// Let it run to completion in the background (a release, a query, a connect: all bounded
    /// by the client's timeouts) and re-raise at once.
    Detach,
    /// Cancel `token`, wait for the operation to end, and if it still succeeded (it won the race
    /// with the signal), run `undo` on its result before re-raising.
    Cancel {
        token: CancellationToken,
        undo: Undo<T>,
    },
}

/// Runs `future` on core's runtime and blocks the calling thread until it is done, with the GIL
/// released and Python signals honoured. `lock_name` names the lock in errors that lack it.
///
/// This is the only way a sync method of this module waits.
pub(crate) fn wait<T, F>(
    py: Python<'_>,
    future: F,
    on_signal: OnSignal<T>,
    lock_name: Option<&str>,
) -> PyResult<T>
where
    F: Future<Output = crosslock::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    // An uncontended call finishes right here, its round trip made on this thread (a lane). One
    // that has to wait goes on being polled on this thread too, between its waits on core's
    // runtime, so its result reaches this thread without a hand-off from a runtime task.
    let future = crate::telemetry::traced(py, future);
    let mut call = match py.detach(move || crosslock::host::begin_here(future)) {
        Ok(result) => return result.map_err(|e| to_py_err(py, e, lock_name)),
        Err(call) => call,
    };
    loop {
        let (back, waited) = py.detach(move || {
            let waited = call.wait(TICK);
            (call, waited)
        });
        call = back;
        match waited {
            Waited::Done(result) => return result.map_err(|e| to_py_err(py, e, lock_name)),
            Waited::Pending => {}
            Waited::Lost => {
                return Err(PyRuntimeError::new_err(
                    "crosslock: the operation ended without a result (its runtime task was \
                     dropped); the process may be shutting down",
                ));
            }
        }
        if let Err(signal) = py.check_signals() {
            interrupted(py, call, on_signal);
            return Err(signal);
        }
    }
}

/// The clean-up half of [`wait`] after a signal handler raised.
fn interrupted<T: Send + 'static>(
    py: Python<'_>,
    mut call: Here<crosslock::Result<T>>,
    on_signal: OnSignal<T>,
) {
    let OnSignal::Cancel { token, undo } = on_signal else {
        call.detach();
        return;
    };
    token.cancel();
    py.detach(move || {
        // Core's cancelled acquire gives back a lock it won meanwhile and drops its subscription
        // before it returns; a success here means it completed before it saw the token.
        match call.wait(CLEANUP_LIMIT) {
            Waited::Done(Ok(value)) => {
                let (done, finished) = mpsc::sync_channel(1);
                crosslock::runtime::spawn(async move {
                    undo(value).await;
                    let _ = done.send(());
                });
                let _ = finished.recv_timeout(CLEANUP_LIMIT);
            }
            Waited::Pending => call.detach(),
            Waited::Done(Err(_)) | Waited::Lost => {}
        }
    });
}

/// The undo of a result that nobody has claimed yet: run (spawned on core's runtime) when the
/// guard is dropped unclaimed, skipped once [`claim`](Self::claim)ed.
///
/// It travels with a result on its way to an asyncio awaiter, which can be dropped unseen at
/// two points: by the bridge, unconverted, when the asyncio future was cancelled before the result
/// reached the loop ([`crate::asyncio`]), or by asyncio when the awaiting task was cancelled after
/// the result was set (the Python layer calls `PendingHold.abandon()` for that one). The first is
/// this guard's own drop; the second is the drop of the Python object holding it.
pub(crate) struct Unclaimed {
    undo: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Unclaimed {
    /// A guard that runs `undo` unless claimed. `undo` does nothing until it is dropped unclaimed.
    pub(crate) fn new(undo: impl Future<Output = ()> + Send + 'static) -> Self {
        Unclaimed {
            undo: Some(Box::pin(undo)),
        }
    }

    /// The result reached its caller: never run the undo.
    pub(crate) fn claim(mut self) {
        self.undo = None;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(undo) = self.undo.take() {
            // Never blocks: this can run with the GIL held, on any thread.
            crosslock::runtime::spawn(undo);
        }
    }
}

/// A core result on its way to Python: converted (value or exception) on the event loop's thread
/// when the bridge sets the asyncio future's result.
struct Converted<T> {
    result: crosslock::Result<T>,
    lock_name: Option<String>,
}

impl<'py, T: IntoPyObject<'py>> IntoPyObject<'py> for Converted<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.result {
            Ok(value) => value.into_bound_py_any(py),
            Err(e) => Err(to_py_err(py, e, self.lock_name.as_deref())),
        }
    }
}

/// Returns an asyncio awaitable for `future`, polled on the running event loop's thread. Must be
/// called with a running event loop (from a coroutine). Cancelling the awaitable drops `future` if it is still
/// running; if it has finished, its result is dropped unconverted or, once set, as a Python
/// object (see [`Unclaimed`] for results that must be undone then).
pub(crate) fn awaitable<'py, T, F>(
    py: Python<'py>,
    future: F,
    lock_name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = crosslock::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let lock_name = lock_name.map(str::to_owned);
    let future = crate::telemetry::traced(py, future);
    crate::asyncio::future(py, async move {
        Converted {
            result: future.await,
            lock_name,
        }
    })
}
