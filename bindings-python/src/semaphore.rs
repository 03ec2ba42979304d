//! `crosslock._native.Semaphore`: core's counting semaphore for Python. Durations are seconds
//! as floats (`None` = no limit).

use crosslock::{AcquireOptions, CancellationToken, Semaphore};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::{PyPendingHold, Won};
use crate::runtime::{self, OnSignal, Undo};
use crate::unowned::options;

/// A counting semaphore (core's `Semaphore`); the public wrapper is `crosslock.Semaphore`.
#[pyclass(module = "crosslock._native", name = "Semaphore", frozen)]
pub(crate) struct PySemaphore {
    sem: Semaphore,
}

impl PySemaphore {
    pub(crate) fn new(sem: Semaphore) -> Self {
        PySemaphore { sem }
    }

    fn name(&self) -> &str {
        self.sem.name()
    }
}

#[pymethods]
impl PySemaphore {
    /// The semaphore's name: its key in Redis.
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// Takes `permits` (blocking, GIL released, Ctrl-C honoured); `wait`: seconds, `None` without
    /// limit, 0 one try. Returns whether they were taken, or raises `LockTimeoutError` if
    /// `raise_timeout`.
    #[pyo3(signature = (permits, wait = None, raise_timeout = false))]
    fn acquire(
        &self,
        py: Python<'_>,
        permits: u32,
        wait: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<bool> {
        let token = CancellationToken::new();
        let options = options(self.name(), "semaphore", wait, None)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?
            .cancel(token.clone());
        let sem = self.sem.clone();
        let undo: Undo<bool> = {
            let sem = sem.clone();
            Box::new(move |taken| {
                Box::pin(async move {
                    if taken {
                        let _ = sem.release(permits).await;
                    }
                })
            })
        };
        let future = async move { take(&sem, permits, options, raise_timeout).await };
        runtime::wait(
            py,
            future,
            OnSignal::Cancel { token, undo },
            Some(self.name()),
        )
    }

    /// As `acquire`, as an awaitable of a `PendingHold` whose `claim()` answers whether the
    /// permits were taken (given back if dropped unclaimed).
    #[pyo3(signature = (permits, wait = None, raise_timeout = false))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        permits: u32,
        wait: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = options(self.name(), "semaphore", wait, None)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?;
        let sem = self.sem.clone();
        let future = async move {
            let taken = take(&sem, permits, options, raise_timeout).await?;
            Ok(PyPendingHold::holding(Won::Taken(taken), async move {
                let _ = sem.release(permits).await;
            }))
        };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Gives `permits` back.
    fn release(&self, py: Python<'_>, permits: u32) -> PyResult<()> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.release(permits).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `release`, as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>, permits: u32) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.release(permits).await },
            Some(self.name()),
        )
    }

    /// Gives `permits` back only if the semaphore exists (Redisson's `releaseIfExists`);
    /// whether it did.
    fn release_if_exists(&self, py: Python<'_>, permits: u32) -> PyResult<bool> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.release_if_exists(permits).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `release_if_exists`, as an awaitable.
    fn release_if_exists_async<'py>(
        &self,
        py: Python<'py>,
        permits: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.release_if_exists(permits).await },
            Some(self.name()),
        )
    }

    /// Sets the permits if none are set; whether it did.
    fn try_set_permits(&self, py: Python<'_>, permits: u32) -> PyResult<bool> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.try_set_permits(permits).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `try_set_permits`, as an awaitable.
    fn try_set_permits_async<'py>(
        &self,
        py: Python<'py>,
        permits: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.try_set_permits(permits).await },
            Some(self.name()),
        )
    }

    /// Adds (or, negative, removes) permits; returns the new count.
    fn add_permits(&self, py: Python<'_>, permits: i64) -> PyResult<i64> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.add_permits(permits).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `add_permits`, as an awaitable.
    fn add_permits_async<'py>(&self, py: Python<'py>, permits: i64) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.add_permits(permits).await },
            Some(self.name()),
        )
    }

    /// The permits available now.
    fn available_permits(&self, py: Python<'_>) -> PyResult<i64> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.available_permits().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `available_permits`, as an awaitable.
    fn available_permits_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.available_permits().await },
            Some(self.name()),
        )
    }

    /// Takes every available permit; returns how many.
    fn drain_permits(&self, py: Python<'_>) -> PyResult<i64> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.drain_permits().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `drain_permits`, as an awaitable.
    fn drain_permits_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.drain_permits().await },
            Some(self.name()),
        )
    }

    /// Deletes the counter; whether it existed.
    fn delete(&self, py: Python<'_>) -> PyResult<bool> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.delete().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    fn __repr__(&self) -> String {
        format!("<crosslock._native.Semaphore {:?}>", self.name())
    }
}

async fn take(
    sem: &Semaphore,
    permits: u32,
    options: AcquireOptions,
    raise_timeout: bool,
) -> crosslock::Result<bool> {
    let wait = options.wait;
    let taken = sem.take(permits, options).await?;
    if !taken && raise_timeout {
        return Err(sem.timeout_error(permits, wait.unwrap_or_default()).await);
    }
    Ok(taken)
}
