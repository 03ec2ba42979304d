//! `crosslock._native.PermitExpirableSemaphore`: core's semaphore of permits with ids and
//! leases, for Python. Durations are seconds as floats (`None` = no limit).

use crosslock::{AcquireOptions, CancellationToken, PermitExpirableSemaphore, ffi};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::{PyPendingHold, Won};
use crate::runtime::{self, OnSignal, Undo};
use crate::unowned::{options, seconds};

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
