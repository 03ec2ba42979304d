//! `crosslock._native.CountDownLatch`: core's count-down latch for Python. Durations are
//! seconds as floats (`None` = no limit).

use crosslock::{CancellationToken, CountDownLatch};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::runtime::{self, OnSignal, Undo};
use crate::unowned::options;

/// A count-down latch (core's `CountDownLatch`).
#[pyclass(module = "crosslock._native", name = "CountDownLatch", frozen)]
pub(crate) struct PyCountDownLatch {
    latch: CountDownLatch,
}

impl PyCountDownLatch {
    pub(crate) fn new(latch: CountDownLatch) -> Self {
        PyCountDownLatch { latch }
    }

    fn name(&self) -> &str {
        self.latch.name()
    }
}

#[pymethods]
impl PyCountDownLatch {
    /// The latch's name: its key in Redis.
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// Sets the count unless the latch is counting; whether it did.
    fn try_set_count(&self, py: Python<'_>, count: u64) -> PyResult<bool> {
        let latch = self.latch.clone();
        runtime::wait(
            py,
            async move { latch.try_set_count(count).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `try_set_count`, as an awaitable.
    fn try_set_count_async<'py>(&self, py: Python<'py>, count: u64) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        runtime::awaitable(
            py,
            async move { latch.try_set_count(count).await },
            Some(self.name()),
        )
    }

    /// Counts down by one; returns the count left.
    fn count_down(&self, py: Python<'_>) -> PyResult<u64> {
        let latch = self.latch.clone();
        runtime::wait(
            py,
            async move { latch.count_down().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `count_down`, as an awaitable.
    fn count_down_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        runtime::awaitable(
            py,
            async move { latch.count_down().await },
            Some(self.name()),
        )
    }

    /// The count now.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let latch = self.latch.clone();
        runtime::wait(
            py,
            async move { latch.count().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `count`, as an awaitable.
    fn count_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latch = self.latch.clone();
        runtime::awaitable(py, async move { latch.count().await }, Some(self.name()))
    }

    /// Waits for zero (blocking, GIL released, Ctrl-C honoured); `wait`: seconds or `None`.
    /// Returns whether it opened in time.
    #[pyo3(signature = (wait = None))]
    fn wait(&self, py: Python<'_>, wait: Option<f64>) -> PyResult<bool> {
        let token = CancellationToken::new();
        let options = options(self.name(), "latch", wait, None)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?
            .cancel(token.clone());
        let latch = self.latch.clone();
        let undo: Undo<bool> = Box::new(|_| Box::pin(async {}));
        runtime::wait(
            py,
            async move { latch.open_within(options).await },
            OnSignal::Cancel { token, undo },
            Some(self.name()),
        )
    }

    /// As `wait`, as an awaitable.
    #[pyo3(signature = (wait = None))]
    fn wait_async<'py>(&self, py: Python<'py>, wait: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let options = options(self.name(), "latch", wait, None)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?;
        let latch = self.latch.clone();
        runtime::awaitable(
            py,
            async move { latch.open_within(options).await },
            Some(self.name()),
        )
    }

    /// Deletes the latch; whether it existed.
    fn delete(&self, py: Python<'_>) -> PyResult<bool> {
        let latch = self.latch.clone();
        runtime::wait(
            py,
            async move { latch.delete().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    fn __repr__(&self) -> String {
        format!("<crosslock._native.CountDownLatch {:?}>", self.name())
    }
}
