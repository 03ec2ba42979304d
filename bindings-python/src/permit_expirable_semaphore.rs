//! `crosslock._native.PermitExpirableSemaphore`: core's semaphore of permits with ids and
//! leases, for Python. Durations are seconds as floats (`None` = no limit).

use crosslock::{AcquireOptions, PermitExpirableSemaphore, ffi};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::Won;
use crate::twins::{Named, cancel_by, py_twins};
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

impl Named for PyPermitExpirableSemaphore {
    fn lock_name(&self) -> Option<&str> {
        Some(self.name())
    }
}

py_twins! {
    impl PyPermitExpirableSemaphore {
        /// The semaphore's name: its key in Redis.
        #[getter(name)]
        fn py_name(&self) -> &str {
            self.name()
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
    twins {
        /// Takes a permit (blocking, GIL released, Ctrl-C honoured): its id, or `None` when the
        /// wait limit passed (or `LockTimeoutError` if `raise_timeout`). `lease`: seconds, `None`
        /// = kept by the watchdog.
        #[pyo3(signature = (wait = None, lease = None, raise_timeout = false))]
        cancel(token) hold(Won::Permit) fn acquire | acquire_async (
            &self,
            py,
            wait: Option<f64>,
            lease: Option<f64>,
            raise_timeout: bool,
        ) -> Option<String> {
            let options = options(self.name(), "semaphore", wait, lease)
                .map_err(|e| to_py_err(py, e, Some(self.name())))?;
            let options = cancel_by(options, token);
            let sem = self.sem.clone();
            let undo = {
                let sem = sem.clone();
                move |id: Option<String>| async move {
                    if let Some(id) = id {
                        let _ = sem.try_release(&id).await;
                    }
                }
            };
            (async move { take_permit(&sem, options, raise_timeout).await }, undo)
        }

        /// Releases permit `id`; raises `NotHeldError` (no such permit) or `LockLostError`
        /// (expired).
        fn release | release_async (&self, py, id: String) -> () {
            let sem = self.sem.clone();
            async move { sem.release(&id).await }
        }

        /// Releases permit `id`; whether it was there and unexpired.
        fn try_release | try_release_async (&self, py, id: String) -> bool {
            let sem = self.sem.clone();
            async move { sem.try_release(&id).await }
        }

        /// Makes permit `id` expire `lease` seconds from now; whether it exists.
        fn update_lease | update_lease_async (&self, py, id: String, lease: f64) -> bool {
            let lease = ffi::lease(
                lease,
                1.0,
                &format!("the lease of a permit of semaphore '{}'", self.name()),
            )
            .map_err(|e| to_py_err(py, e, Some(self.name())))?;
            let sem = self.sem.clone();
            async move { sem.update_lease(&id, lease).await }
        }

        /// Seconds before permit `id` expires: `None` if there is no such permit, `inf` if never.
        fn remaining_lease | remaining_lease_async (&self, py, id: String) -> Option<f64> {
            let sem = self.sem.clone();
            async move { sem.remaining_lease(&id).await.map(seconds) }
        }

        /// Sets the permits if none are set; whether it did.
        fn try_set_permits | try_set_permits_async (&self, py, permits: u32) -> bool {
            let sem = self.sem.clone();
            async move { sem.try_set_permits(permits).await }
        }

        /// Adds (or removes) permits; returns the new count.
        fn add_permits | add_permits_async (&self, py, permits: i64) -> i64 {
            let sem = self.sem.clone();
            async move { sem.add_permits(permits).await }
        }

        /// The permits available now (expired ones counted back first).
        fn available_permits | available_permits_async (&self, py) -> i64 {
            let sem = self.sem.clone();
            async move { sem.available_permits().await }
        }
    }
}
