//! `crosslock._native.Semaphore`, `PermitExpirableSemaphore` and `CountDownLatch`: core's
//! owner-less synchronizers for Python. Durations are seconds as floats (`None` = no limit).

use std::time::Duration;

use crosslock::{
    AcquireOptions, CancellationToken, CountDownLatch, PermitExpirableSemaphore, Semaphore, ffi,
};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::{PyPendingHold, Won};
use crate::runtime::{self, OnSignal, Undo};

/// The wait limit (and lease) of a call, validated by core's rules, naming `name`.
fn options(
    name: &str,
    what: &str,
    wait: Option<f64>,
    lease: Option<f64>,
) -> crosslock::Result<AcquireOptions> {
    let mut options = AcquireOptions::new();
    if let Some(wait) = wait {
        options = options.wait(ffi::duration(
            wait,
            1.0,
            &format!("the timeout for {what} '{name}'"),
        )?);
    }
    if let Some(lease) = lease {
        options = options.lease(ffi::lease(
            lease,
            1.0,
            &format!("the lease of a permit of {what} '{name}'"),
        )?);
    }
    Ok(options)
}

/// Seconds as Python sees them: `Duration::MAX` (no expiry) becomes `inf`.
fn seconds(d: Option<Duration>) -> Option<f64> {
    d.map(|d| {
        if d == Duration::MAX {
            f64::INFINITY
        } else {
            d.as_secs_f64()
        }
    })
}

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

/// A semaphore of permits with ids and leases (core's `PermitExpirableSemaphore`).
#[pyclass(
    module = "crosslock._native",
    name = "PermitExpirableSemaphore",
    frozen
)]
pub(crate) struct PyPermitExpirableSemaphore {
    sem: PermitExpirableSemaphore,
}

impl PyPermitExpirableSemaphore {
    pub(crate) fn new(sem: PermitExpirableSemaphore) -> Self {
        PyPermitExpirableSemaphore { sem }
    }

    fn name(&self) -> &str {
        self.sem.name()
    }
}

async fn take_permit(
    sem: &PermitExpirableSemaphore,
    options: AcquireOptions,
    raise_timeout: bool,
) -> crosslock::Result<Option<String>> {
    let wait = options.wait;
    match sem.try_acquire(options).await? {
        // Python tracks the permit by id; the core value only stops being the one to release it.
        Some(permit) => Ok(Some(permit.detach())),
        None if raise_timeout => Err(sem.timeout_error(wait.unwrap_or_default()).await),
        None => Ok(None),
    }
}

#[pymethods]
impl PyPermitExpirableSemaphore {
    /// The semaphore's name: its key in Redis.
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// Takes a permit (blocking, GIL released, Ctrl-C honoured): its id, or `None` when the wait
    /// limit passed (or `LockTimeoutError` if `raise_timeout`). `lease`: seconds, `None` = kept by
    /// the watchdog.
    #[pyo3(signature = (wait = None, lease = None, raise_timeout = false))]
    fn acquire(
        &self,
        py: Python<'_>,
        wait: Option<f64>,
        lease: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Option<String>> {
        let token = CancellationToken::new();
        let options = options(self.name(), "semaphore", wait, lease)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?
            .cancel(token.clone());
        let sem = self.sem.clone();
        let undo: Undo<Option<String>> = {
            let sem = sem.clone();
            Box::new(move |id| {
                Box::pin(async move {
                    if let Some(id) = id {
                        let _ = sem.try_release(&id).await;
                    }
                })
            })
        };
        let future = async move { take_permit(&sem, options, raise_timeout).await };
        runtime::wait(
            py,
            future,
            OnSignal::Cancel { token, undo },
            Some(self.name()),
        )
    }

    /// As `acquire`, as an awaitable of a `PendingHold` whose `claim()` answers the id or `None`
    /// (the permit is released if dropped unclaimed).
    #[pyo3(signature = (wait = None, lease = None, raise_timeout = false))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        wait: Option<f64>,
        lease: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = options(self.name(), "semaphore", wait, lease)
            .map_err(|e| to_py_err(py, e, Some(self.name())))?;
        let sem = self.sem.clone();
        let future = async move {
            let id = take_permit(&sem, options, raise_timeout).await?;
            let undo_id = id.clone();
            Ok(PyPendingHold::holding(Won::Permit(id), async move {
                if let Some(id) = undo_id {
                    let _ = sem.try_release(&id).await;
                }
            }))
        };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Releases permit `id`; raises `NotHeldError` (no such permit) or `LockLostError` (expired).
    fn release(&self, py: Python<'_>, id: String) -> PyResult<()> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.release(&id).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `release`, as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(py, async move { sem.release(&id).await }, Some(self.name()))
    }

    /// Releases permit `id`; whether it was there and unexpired.
    fn try_release(&self, py: Python<'_>, id: String) -> PyResult<bool> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.try_release(&id).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `try_release`, as an awaitable.
    fn try_release_async<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.try_release(&id).await },
            Some(self.name()),
        )
    }

    /// Makes permit `id` expire `lease` seconds from now; whether it exists.
    fn update_lease(&self, py: Python<'_>, id: String, lease: f64) -> PyResult<bool> {
        let lease = ffi::lease(
            lease,
            1.0,
            &format!("the lease of a permit of semaphore '{}'", self.name()),
        )
        .map_err(|e| to_py_err(py, e, Some(self.name())))?;
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.update_lease(&id, lease).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `update_lease`, as an awaitable.
    fn update_lease_async<'py>(
        &self,
        py: Python<'py>,
        id: String,
        lease: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let lease = ffi::lease(
            lease,
            1.0,
            &format!("the lease of a permit of semaphore '{}'", self.name()),
        )
        .map_err(|e| to_py_err(py, e, Some(self.name())))?;
        let sem = self.sem.clone();
        runtime::awaitable(
            py,
            async move { sem.update_lease(&id, lease).await },
            Some(self.name()),
        )
    }

    /// Seconds before permit `id` expires: `None` if there is no such permit, `inf` if never.
    fn remaining_lease(&self, py: Python<'_>, id: String) -> PyResult<Option<f64>> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.remaining_lease(&id).await.map(seconds) },
            OnSignal::Detach,
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

    /// Adds (or removes) permits; returns the new count.
    fn add_permits(&self, py: Python<'_>, permits: i64) -> PyResult<i64> {
        let sem = self.sem.clone();
        runtime::wait(
            py,
            async move { sem.add_permits(permits).await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// The permits available now (expired ones counted back first).
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

    /// Whether this client found permit `id` lost (and it was not released since).
    fn is_lost(&self, id: &str) -> bool {
        self.sem.is_lost(id)
    }

    fn __repr__(&self) -> String {
        format!(
            "<crosslock._native.PermitExpirableSemaphore {:?}>",
            self.name()
        )
    }
}

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
