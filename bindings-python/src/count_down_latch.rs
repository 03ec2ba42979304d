//! `crosslock._native.CountDownLatch`: core's count-down latch for Python. Durations are
//! seconds as floats (`None` = no limit).

use crosslock::CountDownLatch;
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::twins::{Named, cancel_by, py_twins};
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

impl Named for PyCountDownLatch {
    fn lock_name(&self) -> Option<&str> {
        Some(self.name())
    }
}

py_twins! {
    impl PyCountDownLatch {
        /// The latch's name: its key in Redis.
        #[getter(name)]
        fn py_name(&self) -> &str {
            self.name()
        }

        fn __repr__(&self) -> String {
            format!("<crosslock._native.CountDownLatch {:?}>", self.name())
        }
    }
    twins {
        /// Sets the count unless the latch is counting; whether it did.
        fn try_set_count | try_set_count_async (&self, py, count: u64) -> bool {
            let latch = self.latch.clone();
            async move { latch.try_set_count(count).await }
        }

        /// Counts down by one; returns the count left.
        fn count_down | count_down_async (&self, py) -> u64 {
            let latch = self.latch.clone();
            async move { latch.count_down().await }
        }

        /// The count now.
        fn count | count_async (&self, py) -> u64 {
            let latch = self.latch.clone();
            async move { latch.count().await }
        }

        /// Waits for zero (blocking, GIL released, Ctrl-C honoured); `wait`: seconds or `None`.
        /// Returns whether it opened in time.
        #[pyo3(signature = (wait = None))]
        cancel(token) fn wait | wait_async (&self, py, wait: Option<f64>) -> bool {
            let options = options(self.name(), "latch", wait, None)
                .map_err(|e| to_py_err(py, e, Some(self.name())))?;
            let options = cancel_by(options, token);
            let latch = self.latch.clone();
            // Waiting takes nothing: nothing to give back.
            let undo = |_: bool| async {};
            (async move { latch.open_within(options).await }, undo)
        }

        /// Deletes the latch; whether it existed.
        fn delete | delete_async (&self, py) -> bool {
            let latch = self.latch.clone();
            async move { latch.delete().await }
        }
    }
}
