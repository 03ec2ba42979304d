//! `crosslock._native.MultiLock`: core's one `MultiLock` over native locks, for Python: all the
//! parts, or (`red`) a majority (`MultiLock::majority`, what a `RedLock` is).
//!
//! An acquire answers `None` when the wait limit passed, else `(validity, parts)`: the validity in
//! seconds (with a lease; `None` without) and the names of the parts held.

use crosslock::{AcquireOptions, MultiLock, Owner, ffi};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::{PyLock, Won};
use crate::twins::{Named, cancel_by, py_twins};

type Held = Option<(Option<f64>, Vec<String>)>;

/// All of several locks, or (`red`) a majority of them.
#[pyclass(module = "crosslock._native", name = "MultiLock", frozen)]
pub(crate) struct PyMultiLock {
    inner: MultiLock,
    label: String,
}

impl PyMultiLock {
    fn options(&self, wait: Option<f64>, lease: Option<f64>) -> crosslock::Result<AcquireOptions> {
        let mut options = AcquireOptions::new();
        if let Some(wait) = wait {
            options = options.wait(ffi::duration(
                wait,
                1.0,
                &format!("the timeout for the multi-lock of {}", self.label),
            )?);
        }
        if let Some(lease) = lease {
            options = options.lease(ffi::lease(
                lease,
                1.0,
                &format!("the lease of the multi-lock of {}", self.label),
            )?);
        }
        Ok(options)
    }

    async fn acquire_inner(
        inner: MultiLock,
        label: String,
        owner: Owner,
        options: AcquireOptions,
        raise_timeout: bool,
    ) -> crosslock::Result<Held> {
        let wait = options.wait;
        let held = inner
            .acquire_as(owner, &options)
            .await?
            .map(|(validity, parts)| (validity.map(|v| v.as_secs_f64()), parts));
        if held.is_none() && raise_timeout {
            return Err(ffi::timeout(
                format!(
                    "gave up waiting for the multi-lock of {label} after {:.3}s; nothing is held",
                    wait.unwrap_or_default().as_secs_f64()
                ),
                wait.unwrap_or_default(),
            ));
        }
        Ok(held)
    }
}

impl Named for PyMultiLock {
    /// A multi-lock's errors name no one lock (their messages name the parts).
    fn lock_name(&self) -> Option<&str> {
        None
    }
}

py_twins! {
    impl PyMultiLock {
        /// A multi-lock over `locks` (native `Lock`s, in order); a red lock (a majority) if `red`.
        #[new]
        #[pyo3(signature = (locks, red = false))]
        fn new(py: Python<'_>, locks: Vec<PyRef<'_, PyLock>>, red: bool) -> PyResult<Self> {
            let parts: Vec<_> = locks.iter().map(|l| l.lock.clone()).collect();
            let label = parts
                .iter()
                .map(|l| format!("'{}'", l.name()))
                .collect::<Vec<_>>()
                .join(", ");
            let inner = if red {
                MultiLock::majority(parts)
            } else {
                MultiLock::new(parts)
            };
            let inner = inner.map_err(|e| to_py_err(py, e, None))?;
            Ok(PyMultiLock { inner, label })
        }

        /// The parts' names, in order.
        #[getter]
        fn names(&self) -> Vec<String> {
            self.inner.names()
        }

        /// Whether the acquisition of `owner` may be lost.
        fn is_lost(&self, owner: u64) -> bool {
            self.inner.is_lost(Owner::new(owner))
        }

        fn __repr__(&self) -> String {
            format!("<crosslock._native.MultiLock {}>", self.label)
        }
    }
    twins {
        /// Acquires for `owner` (blocking, GIL released, Ctrl-C honoured).
        #[pyo3(signature = (owner, wait = None, lease = None, raise_timeout = false))]
        cancel(token) hold(Won::Multi) fn acquire | acquire_async (
            &self,
            py,
            owner: u64,
            wait: Option<f64>,
            lease: Option<f64>,
            raise_timeout: bool,
        ) -> Held {
            let owner = Owner::new(owner);
            let options = self
                .options(wait, lease)
                .map_err(|e| to_py_err(py, e, None))?;
            let options = cancel_by(options, token);
            let inner = self.inner.clone();
            let undo = {
                let inner = inner.clone();
                move |held: Held| async move {
                    if held.is_some() {
                        let _ = inner.release_as(owner).await;
                    }
                }
            };
            let future =
                Self::acquire_inner(inner, self.label.clone(), owner, options, raise_timeout);
            (future, undo)
        }

        /// Releases every part `owner` holds.
        fn release | release_async (&self, py, owner: u64) -> () {
            let inner = self.inner.clone();
            async move { inner.release_as(Owner::new(owner)).await }
        }

        /// Sets the lease of every part `owner` holds to `lease` seconds from now; the validity
        /// (s).
        fn extend | extend_async (&self, py, owner: u64, lease: f64) -> f64 {
            let inner = self.inner.clone();
            let lease = ffi::duration(lease, 1.0, "the lease an extend of the multi-lock sets")
                .map_err(|e| to_py_err(py, e, None))?;
            async move {
                Ok(inner
                    .extend_as(Owner::new(owner), lease)
                    .await?
                    .as_secs_f64())
            }
        }
    }
}
