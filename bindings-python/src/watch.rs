//! `Client.watch` for Python: core's [`crosslock::Watch`] behind one lock, its events as plain
//! dicts. The iterator protocols live in the Python package (`crosslock/inspect.py`).

use std::sync::Arc;

use crosslock::{CancellationToken, WatchEvent};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::Mutex;

use crate::error::to_py_err;
use crate::inspect::PyInspection;
use crate::runtime::{self, OnSignal};

/// One event on its way to Python: `{"at", "event", "name", "holder", "detail", "text", "state"}`.
pub(crate) struct PyWatchEvent(WatchEvent);

impl<'py> IntoPyObject<'py> for PyWatchEvent {
    type Target = PyDict;
    type Output = Bound<'py, PyDict>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = self.0;
        let out = PyDict::new(py);
        out.set_item("at", e.at_ms() as f64 / 1000.0)?;
        out.set_item("event", e.kind.as_str())?;
        out.set_item("name", &e.state.name)?;
        out.set_item("holder", e.holder.as_deref())?;
        out.set_item("detail", &e.detail)?;
        out.set_item("text", e.to_string())?;
        out.set_item("state", PyInspection(e.state))?;
        Ok(out)
    }
}

/// A live view of one object (see core's `Client::watch`); `next` blocks, `next_async` awaits.
#[pyclass(name = "Watch", module = "crosslock._native", frozen)]
pub(crate) struct PyWatch {
    inner: Arc<Mutex<Option<crosslock::Watch>>>,
    /// Cancelled by `close`: a pending `next` answers `None`.
    closed: CancellationToken,
    /// The snapshot the watch started from.
    initial: crosslock::Inspection,
}

impl PyWatch {
    pub(crate) fn new(watch: crosslock::Watch) -> Self {
        let initial = watch.current().clone();
        PyWatch {
            inner: Arc::new(Mutex::new(Some(watch))),
            closed: CancellationToken::new(),
            initial,
        }
    }
}

/// The next event; `None` once the watch is closed or `interrupt` is cancelled.
async fn next_of(
    inner: Arc<Mutex<Option<crosslock::Watch>>>,
    closed: CancellationToken,
    interrupt: CancellationToken,
) -> crosslock::Result<Option<PyWatchEvent>> {
    tokio::select! {
        _ = closed.cancelled() => Ok(None),
        _ = interrupt.cancelled() => Ok(None),
        event = async {
            let mut guard = inner.lock().await;
            match guard.as_mut() {
                Some(watch) => watch.next().await.map(|e| Some(PyWatchEvent(e))),
                None => Ok(None),
            }
        } => event,
    }
}

#[pymethods]
impl PyWatch {
    /// The object as it was when the watch started, as `Client.inspect` returns it.
    #[getter]
    fn initial(&self) -> PyInspection {
        PyInspection(self.initial.clone())
    }

    /// The next change (blocking, GIL released, Ctrl-C honoured); `None` once closed.
    fn next(&self, py: Python<'_>) -> PyResult<Option<PyWatchEvent>> {
        let token = CancellationToken::new();
        runtime::wait(
            py,
            next_of(self.inner.clone(), self.closed.clone(), token.clone()),
            OnSignal::Cancel {
                token,
                undo: Box::new(|_| Box::pin(async {})),
            },
            None,
        )
    }

    /// As `next`, as an awaitable (cancelling it loses no event: core queues what it found).
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let never = CancellationToken::new();
        runtime::awaitable(
            py,
            next_of(self.inner.clone(), self.closed.clone(), never),
            None,
        )
    }

    /// Closes the watch's subscription connection; a pending or later `next` answers `None`.
    fn close(&self) {
        self.closed.cancel();
        let inner = self.inner.clone();
        crosslock::runtime::spawn(async move {
            inner.lock().await.take();
        });
    }
}

/// Starts a watch (used by `Client.watch`).
pub(crate) fn start(
    py: Python<'_>,
    client: crosslock::Client,
    name: String,
    interval: f64,
) -> PyResult<PyWatch> {
    let interval = crosslock::ffi::duration(interval, 1.0, "interval")
        .map_err(|e| to_py_err(py, e, Some(&name)))?;
    let watched = name.clone();
    runtime::wait(
        py,
        async move { client.watch(&name, interval).await.map(PyWatch::new) },
        OnSignal::Detach,
        Some(&watched),
    )
}

/// As [`start`], as an awaitable.
pub(crate) fn start_async<'py>(
    py: Python<'py>,
    client: crosslock::Client,
    name: String,
    interval: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let interval = crosslock::ffi::duration(interval, 1.0, "interval")
        .map_err(|e| to_py_err(py, e, Some(&name)))?;
    let watched = name.clone();
    runtime::awaitable(
        py,
        async move { client.watch(&name, interval).await.map(PyWatch::new) },
        Some(&watched),
    )
}
