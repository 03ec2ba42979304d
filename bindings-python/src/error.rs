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

struct Classes {
    base: Py<PyType>,
    not_held: Py<PyType>,
    timeout: Py<PyType>,
    lock_lost: Py<PyType>,
    unavailable: Py<PyType>,
    wrong_type: Py<PyType>,
    invalid_argument: Py<PyType>,
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
            not_held: class("NotHeldError")?,
            timeout: class("LockTimeoutError")?,
            lock_lost: class("LockLostError")?,
            unavailable: class("RedisUnavailableError")?,
            wrong_type: class("WrongTypeError")?,
            invalid_argument: class("InvalidArgumentError")?,
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
    let classes = classes(py)?;
    let class = match err.kind() {
        ErrorKind::NotHeld => &classes.not_held,
        ErrorKind::Timeout => &classes.timeout,
        ErrorKind::LockLost => &classes.lock_lost,
        ErrorKind::Unavailable => &classes.unavailable,
        ErrorKind::WrongType => &classes.wrong_type,
        ErrorKind::InvalidArgument => &classes.invalid_argument,
        ErrorKind::Cancelled => return Ok(CancelledError::new_err(err.to_string())),
        // `Redis` and any kind core adds later: the base class, with the kind's code.
        _ => &classes.base,
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("lock_name", err.lock_name().or(lock_name))?;
    kwargs.set_item("holder", err.holder())?;
    kwargs.set_item("code", err.kind().code())?;
    kwargs.set_item("waited", err.waited().map(|w| w.as_secs_f64()))?;
    let exception = class.bind(py).call((err.to_string(),), Some(&kwargs))?;
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
