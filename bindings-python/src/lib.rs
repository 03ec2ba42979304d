//! `crosslock._native`: the private native module under the `crosslock` Python package.
//!
//! It only converts arguments, maps errors and blocks or returns an awaitable; identity (which
//! `<n>` a thread or asyncio task is) and the Python idioms (context managers, `threading.Lock`'s
//! `blocking`/`timeout` meaning, the lost-lock flag and callback) live in the hand-written package
//! `bindings-python/python/crosslock/`. Everything else is core's.
//!
//! - [`client`]: `Client` (connect, close, the lost-lock listener);
//! - [`lock`]: `Lock` (acquire/release/queries for an explicit owner number) and `PendingHold`
//!   (what `acquire_async` resolves to: a won hold given back unless the caller claims it);
//! - [`semaphore`], [`permit_expirable_semaphore`], [`count_down_latch`]: `Semaphore`,
//!   `PermitExpirableSemaphore`, `CountDownLatch` (one file each; [`unowned`] has what they share);
//! - [`watch`]: `Watch` (a live view of one object, for `Client.watch` and `crosslock watch`);
//! - [`multi_lock`]: `MultiLock` (also the `RedLock`), over native `Lock`s;
//! - [`logging`]: core's `tracing` events into Python's `logging` (logger `crosslock`);
//! - [`telemetry`]: core's telemetry events, in batches, to `crosslock/_telemetry.py`
//!   (`connect(metrics=...)`: OpenTelemetry metrics);
//! - [`error`]: the one core-error → Python-exception conversion;
//! - [`runtime`]: the one blocking helper (GIL released, Ctrl-C honoured) and the awaitable
//!   helper, both on core's process runtime;
//! - [`asyncio`]: the asyncio bridge under the awaitable helper (one completion queue per event
//!   loop, woken through a socket pair the loop watches).

use pyo3::prelude::*;

mod asyncio;
mod client;
mod count_down_latch;
mod error;
mod inspect;
mod lock;
mod logging;
mod multi_lock;
mod permit_expirable_semaphore;
mod runtime;
mod semaphore;
mod telemetry;
mod twins;
mod unowned;
mod watch;

/// Makes the forked child's runtime switch eager: called by `os.register_at_fork(after_in_child=…)`.
///
/// Core notices a foreign pid by itself on the next operation; this only does it up front.
#[pyfunction]
fn _after_fork() {
    crosslock::runtime::reset_after_fork();
    telemetry::after_fork();
}

/// Reports `exc` through `sys.unraisablehook`, naming `obj` (used for exceptions raised by
/// `on_lost` callbacks, which run on a background thread with nobody to catch them).
#[pyfunction]
fn _write_unraisable(exc: Bound<'_, PyAny>, obj: Option<Bound<'_, PyAny>>) {
    let py = exc.py();
    PyErr::from_value(exc).write_unraisable(py, obj.as_ref());
}

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crosslock::ffi::set_language("py");
    m.add_class::<client::PyClient>()?;
    m.add_class::<lock::PyLock>()?;
    m.add_class::<lock::PyPendingHold>()?;
    m.add_class::<semaphore::PySemaphore>()?;
    m.add_class::<permit_expirable_semaphore::PyPermitExpirableSemaphore>()?;
    m.add_class::<count_down_latch::PyCountDownLatch>()?;
    m.add_class::<multi_lock::PyMultiLock>()?;
    m.add_class::<watch::PyWatch>()?;
    m.add_function(wrap_pyfunction!(_after_fork, m)?)?;
    m.add_function(wrap_pyfunction!(_write_unraisable, m)?)?;
    m.add_function(wrap_pyfunction!(logging::_refresh_log_level, m)?)?;
    logging::install();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Core's table of argument limits, so the package's checks spell no number of their own.
    let limits = pyo3::types::PyDict::new(m.py());
    for l in crosslock::limits::ALL {
        limits.set_item(l.name, (l.min, l.max, l.shown))?;
    }
    m.add("LIMITS", limits)?;
    // Core's table of lock kinds (type name -> name), so the package spells no kind of its own.
    let kinds = pyo3::types::PyDict::new(m.py());
    for kind in crosslock::LockKind::ALL {
        kinds.set_item(format!("{kind:?}"), kind.as_str())?;
    }
    m.add("KINDS", kinds)?;
    // Core's connect defaults, so the package (connect's signature, the CLI) spells none of its own.
    let defaults = pyo3::types::PyDict::new(m.py());
    for (name, seconds) in client::connect_defaults() {
        defaults.set_item(name, seconds)?;
    }
    m.add("CONNECT_DEFAULTS", defaults)?;
    m.add("DEFAULT_LANES", crosslock::Lanes::default().name())?;
    m.add("TELEMETRY_INSTRUMENTS", telemetry::instruments(m.py())?)?;
    Ok(())
}
