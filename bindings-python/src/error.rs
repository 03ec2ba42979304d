//! The one place a core [`crosslock::Error`] becomes a Python exception.
//!
//! The exception classes are defined in Python (`crosslock/errors.py`) so that each can also be
//! the builtin a Python programmer expects (`NotHeldError` is a `RuntimeError`, `LockTimeoutError`
//! a `TimeoutError`, …) and pickle. They are imported once and cached.

use pyo3::exceptions::asyncio::CancelledError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

use crosslock::{Error, ErrorKind};

/// The classes of `crosslock.errors`, imported once: `by_code` maps each kind's code to its
/// class (`errors.py` builds it from the `CrosslockError` subclasses, the one table in Python).
struct Classes {
    base: Py<PyType>,
    by_code: Py<PyDict>,
    redis_cause: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("crosslock.errors")?;
        let class = |name: &str| -> PyResult<Py<PyType>> {
            Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            base: class("CrosslockError")?,
            by_code: module.getattr("_BY_CODE")?.cast_into::<PyDict>()?.unbind(),
            redis_cause: class("RedisError")?,
        })
    })
}

/// Converts `err` into the matching `crosslock.errors` exception, with `lock_name`, `holder`,
/// `code` and `waited` attributes and the Redis cause chain as `__cause__`.
///
/// `lock_name` names the lock for errors that core raised before it knew one (an argument check).
/// A cancelled wait becomes `asyncio.CancelledError`: cancellation is the host's, never a
/// crosslock error.
pub(crate) fn to_py_err(py: Python<'_>, err: Error, lock_name: Option<&str>) -> PyErr {
    build(py, &err, lock_name).unwrap_or_else(|failed| failed)
}

fn build(py: Python<'_>, err: &Error, lock_name: Option<&str>) -> PyResult<PyErr> {
    if err.kind() == ErrorKind::Cancelled {
        return Ok(CancelledError::new_err(err.to_string()));
    }
    let classes = classes(py)?;
    let code = err.kind().code();
    // A kind core adds later and Python does not know yet: the base class, with the kind's code.
    let class = match classes.by_code.bind(py).get_item(code)? {
        Some(class) => class,
        None => classes.base.bind(py).clone().into_any(),
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("lock_name", err.lock_name().or(lock_name))?;
    kwargs.set_item("holder", err.holder())?;
    kwargs.set_item("code", code)?;
    kwargs.set_item("waited", err.waited().map(|w| w.as_secs_f64()))?;
    let exception = class.call((err.to_string(),), Some(&kwargs))?;
    let converted = PyErr::from_value(exception);
    if let Some(cause) = cause_chain(py, classes, std::error::Error::source(err))? {
        converted.set_cause(py, Some(cause));
    }
    Ok(converted)
}

/// `RedisError(message)` for each link of a source chain, outermost first, chained by `__cause__`.
fn cause_chain(
    py: Python<'_>,
    classes: &Classes,
    source: Option<&(dyn std::error::Error + 'static)>,
) -> PyResult<Option<PyErr>> {
    let Some(source) = source else {
        return Ok(None);
    };
    let this = PyErr::from_value(classes.redis_cause.bind(py).call1((source.to_string(),))?);
    if let Some(inner) = cause_chain(py, classes, source.source())? {
        this.set_cause(py, Some(inner));
    }
    Ok(Some(this))
}
