//! `crosslock._native.Semaphore`: core's counting semaphore for Python. Durations are seconds
//! as floats (`None` = no limit).

use crosslock::{AcquireOptions, Semaphore};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::Won;
use crate::twins::{Named, cancel_by, py_twins};
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

impl Named for PySemaphore {
    fn lock_name(&self) -> Option<&str> {
        Some(self.name())
    }
}

py_twins! {
    impl PySemaphore {
        /// The semaphore's name: its key in Redis.
        #[getter(name)]
        fn py_name(&self) -> &str {
            self.name()
        }

        fn __repr__(&self) -> String {
            format!("<crosslock._native.Semaphore {:?}>", self.name())
        }
    }
    twins {
        /// Takes `permits` (blocking, GIL released, Ctrl-C honoured); `wait`: seconds, `None`
        /// without limit, 0 one try. Returns whether they were taken, or raises
        /// `LockTimeoutError` if `raise_timeout`.
        #[pyo3(signature = (permits, wait = None, raise_timeout = false))]
        cancel(token) hold(Won::Taken) fn acquire | acquire_async (
            &self,
            py,
            permits: u32,
            wait: Option<f64>,
            raise_timeout: bool,
        ) -> bool {
            let options = options(self.name(), "semaphore", wait, None)
                .map_err(|e| to_py_err(py, e, Some(self.name())))?;
            let options = cancel_by(options, token);
            let sem = self.sem.clone();
            let undo = {
                let sem = sem.clone();
                move |taken: bool| async move {
                    if taken {
                        let _ = sem.release(permits).await;
                    }
                }
            };
            (async move { take(&sem, permits, options, raise_timeout).await }, undo)
        }

        /// Gives `permits` back.
        fn release | release_async (&self, py, permits: u32) -> () {
            let sem = self.sem.clone();
            async move { sem.release(permits).await }
        }

        /// Gives `permits` back only if the semaphore exists (Redisson's `releaseIfExists`);
        /// whether it did.
        fn release_if_exists | release_if_exists_async (&self, py, permits: u32) -> bool {
            let sem = self.sem.clone();
            async move { sem.release_if_exists(permits).await }
        }

        /// Sets the permits if none are set; whether it did.
        fn try_set_permits | try_set_permits_async (&self, py, permits: u32) -> bool {
            let sem = self.sem.clone();
            async move { sem.try_set_permits(permits).await }
        }

        /// Adds (or, negative, removes) permits; returns the new count.
        fn add_permits | add_permits_async (&self, py, permits: i64) -> i64 {
            let sem = self.sem.clone();
            async move { sem.add_permits(permits).await }
        }

        /// The permits available now.
        fn available_permits | available_permits_async (&self, py) -> i64 {
            let sem = self.sem.clone();
            async move { sem.available_permits().await }
        }

        /// Takes every available permit; returns how many.
        fn drain_permits | drain_permits_async (&self, py) -> i64 {
            let sem = self.sem.clone();
            async move { sem.drain_permits().await }
        }

        /// Deletes the counter; whether it existed.
        fn delete | delete_async (&self, py) -> bool {
            let sem = self.sem.clone();
            async move { sem.delete().await }
        }
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
