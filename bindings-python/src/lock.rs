//! `crosslock._native.Lock`: any lock of the RLock family (core's [`AnyLock`]) for Python.
//!
//! One native class serves every lock type (`Lock`, `FairLock`, `SpinLock`, `FencedLock`,
//! `NonReentrantLock`, and the read and write locks of a `ReadWriteLock`): the client's factories
//! hand out the type-erased lock, and the Python package wraps it in the type's own class.
//!
//! Every method takes the caller's owner number explicitly: the Python layer
//! (`crosslock/_identity.py`) decides which thread or asyncio task is calling. Durations are
//! seconds as floats (`None` = no limit / watchdog). An acquire answers `None` when the wait limit
//! passed, else the fencing token (0 for kinds without one).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crosslock::{AcquireOptions, AnyLock, CancellationToken, Owner, ffi};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::runtime::{self, OnSignal, Unclaimed, Undo};

/// A handle on one named lock of any kind; the public wrappers are `crosslock.Lock`,
/// `crosslock.FairLock`, …
#[pyclass(module = "crosslock._native", name = "Lock", frozen)]
pub(crate) struct PyLock {
    pub(crate) lock: Arc<dyn AnyLock>,
}

/// What an acquire answers Python: `None` (not acquired) or the token (0 when the kind has none).
fn token_of(acquired: Option<crosslock::Acquisition>) -> Option<u64> {
    acquired.map(|a| a.token.unwrap_or(0))
}

impl PyLock {
    pub(crate) fn new(lock: Arc<dyn AnyLock>) -> Self {
        PyLock { lock }
    }

    fn name(&self) -> &str {
        self.lock.name()
    }

    /// The wait limit and lease, validated by core's rules.
    fn options(&self, wait: Option<f64>, lease: Option<f64>) -> crosslock::Result<AcquireOptions> {
        let name = self.name();
        let mut options = AcquireOptions::new();
        if let Some(wait) = wait {
            options = options.wait(ffi::duration(
                wait,
                1.0,
                &format!("the timeout for lock '{name}'"),
            )?);
        }
        if let Some(lease) = lease {
            options = options.lease(ffi::lease(
                lease,
                1.0,
                &format!("the lease of lock '{name}'"),
            )?);
        }
        Ok(options)
    }

    /// The lease an extend sets (core checks its range).
    fn extend_lease(&self, lease: f64) -> crosslock::Result<Duration> {
        ffi::duration(
            lease,
            1.0,
            &format!("the lease an extend of lock '{}' sets", self.name()),
        )
    }

    fn err(&self, py: Python<'_>, e: crosslock::Error) -> PyErr {
        to_py_err(py, e, Some(self.name()))
    }

    /// The future of one acquire: `Ok(None)` when the wait limit passed (or the core timeout
    /// error if `raise_timeout`).
    fn acquire_future(
        &self,
        owner: Owner,
        options: AcquireOptions,
        raise_timeout: bool,
    ) -> impl std::future::Future<Output = crosslock::Result<Option<u64>>> + Send + 'static {
        let lock = self.lock.clone();
        async move {
            ffi::acquire(&lock, owner, &options, raise_timeout)
                .await
                .map(token_of)
        }
    }
}

#[pymethods]
impl PyLock {
    /// The lock's name: its key in Redis.
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// The kind of lock (`"lock"`, `"fair_lock"`, `"read_lock"`, …).
    #[getter]
    fn kind(&self) -> &'static str {
        self.lock.kind().as_str()
    }

    /// Acquires for `owner` (blocking, GIL released, Ctrl-C honoured). `wait`: seconds, `None`
    /// waits without limit, `0` tries once. `lease`: seconds, `None` means watchdog renewal.
    /// Returns `None` when the wait limit passes (or raises `LockTimeoutError` if
    /// `raise_timeout`), else the fencing token (0 for kinds without one).
    #[pyo3(signature = (owner, wait = None, lease = None, raise_timeout = false))]
    fn acquire(
        &self,
        py: Python<'_>,
        owner: u64,
        wait: Option<f64>,
        lease: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Option<u64>> {
        let owner = Owner::new(owner);
        let token = CancellationToken::new();
        let options = self
            .options(wait, lease)
            .map_err(|e| self.err(py, e))?
            .cancel(token.clone());
        let lock = self.lock.clone();
        // If the acquire completed just as Ctrl-C arrived, give that hold back.
        let undo: Undo<Option<u64>> = Box::new(move |acquired| {
            Box::pin(async move {
                if acquired.is_some() {
                    let _ = lock.release_as(owner).await;
                }
            })
        });
        runtime::wait(
            py,
            self.acquire_future(owner, options, raise_timeout),
            OnSignal::Cancel { token, undo },
            Some(self.name()),
        )
    }

    /// As `acquire`, as an awaitable (an `asyncio.Future`) of a [`PyPendingHold`]: the caller
    /// must `claim()` it to keep a won hold. If it is dropped unclaimed (the awaiting task was
    /// cancelled just as the acquire completed), that hold is given back. Cancelling it while it
    /// waits leaves nothing behind (core's cancel-safety).
    #[pyo3(signature = (owner, wait = None, lease = None, raise_timeout = false))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        owner: u64,
        wait: Option<f64>,
        lease: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = self.options(wait, lease).map_err(|e| self.err(py, e))?;
        let owner = Owner::new(owner);
        let acquire = self.acquire_future(owner, options, raise_timeout);
        let lock = self.lock.clone();
        let future = async move {
            // No await between the acquire's success and the guard: from here on, a hold that
            // never reaches the caller is given back.
            let acquired = acquire.await?;
            Ok(PyPendingHold::new(acquired, lock, owner))
        };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Releases one hold of `owner`; `True` when that fully released the lock. Raises
    /// `NotHeldError` (Redis unchanged) or `LockLostError`.
    fn release(&self, py: Python<'_>, owner: u64) -> PyResult<bool> {
        let lock = self.lock.clone();
        let future = async move { lock.release_as(Owner::new(owner)).await };
        runtime::wait(py, future, OnSignal::Detach, Some(self.name()))
    }

    /// As `release`, as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>, owner: u64) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        let future = async move { lock.release_as(Owner::new(owner)).await };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Sets the lease of the hold of `owner` to `lease` seconds from now. Raises `NotHeldError`
    /// or `LockLostError`.
    fn extend(&self, py: Python<'_>, owner: u64, lease: f64) -> PyResult<()> {
        let lock = self.lock.clone();
        let lease = self.extend_lease(lease).map_err(|e| self.err(py, e))?;
        let future = async move { lock.extend_as(Owner::new(owner), lease).await };
        runtime::wait(py, future, OnSignal::Detach, Some(self.name()))
    }

    /// As `extend`, as an awaitable.
    fn extend_async<'py>(
        &self,
        py: Python<'py>,
        owner: u64,
        lease: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        let lease = self.extend_lease(lease).map_err(|e| self.err(py, e))?;
        let future = async move { lock.extend_as(Owner::new(owner), lease).await };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Deletes the lock whoever holds it; `True` if it was locked.
    fn force_unlock(&self, py: Python<'_>) -> PyResult<bool> {
        let lock = self.lock.clone();
        runtime::wait(
            py,
            async move { lock.force_unlock().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `force_unlock`, as an awaitable.
    fn force_unlock_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        runtime::awaitable(
            py,
            async move { lock.force_unlock().await },
            Some(self.name()),
        )
    }

    /// Whether anyone holds the lock.
    fn is_locked(&self, py: Python<'_>) -> PyResult<bool> {
        let lock = self.lock.clone();
        runtime::wait(
            py,
            async move { lock.is_locked().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `is_locked`, as an awaitable.
    fn is_locked_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        runtime::awaitable(py, async move { lock.is_locked().await }, Some(self.name()))
    }

    /// Whether `owner` of this client holds the lock.
    fn is_held_by(&self, py: Python<'_>, owner: u64) -> PyResult<bool> {
        let lock = self.lock.clone();
        let future = async move { Ok(lock.hold_count_of(Owner::new(owner)).await? > 0) };
        runtime::wait(py, future, OnSignal::Detach, Some(self.name()))
    }

    /// As `is_held_by`, as an awaitable.
    fn is_held_by_async<'py>(&self, py: Python<'py>, owner: u64) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        let future = async move { Ok(lock.hold_count_of(Owner::new(owner)).await? > 0) };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// How many times `owner` holds the lock (0 when it does not).
    fn hold_count_of(&self, py: Python<'_>, owner: u64) -> PyResult<u32> {
        let lock = self.lock.clone();
        let future = async move { lock.hold_count_of(Owner::new(owner)).await };
        runtime::wait(py, future, OnSignal::Detach, Some(self.name()))
    }

    /// As `hold_count_of`, as an awaitable.
    fn hold_count_of_async<'py>(&self, py: Python<'py>, owner: u64) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        let future = async move { lock.hold_count_of(Owner::new(owner)).await };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// Seconds before the lock expires: `None` when unlocked, `inf` when it has no expiry.
    fn remaining_lease(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let lock = self.lock.clone();
        let future = async move { lock.remaining_lease().await.map(lease_seconds) };
        runtime::wait(py, future, OnSignal::Detach, Some(self.name()))
    }

    /// As `remaining_lease`, as an awaitable.
    fn remaining_lease_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        let future = async move { lock.remaining_lease().await.map(lease_seconds) };
        runtime::awaitable(py, future, Some(self.name()))
    }

    /// The current holder strings (`<client-uuid>:<n>`, `…:write`); empty when unlocked.
    fn holders(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let lock = self.lock.clone();
        runtime::wait(
            py,
            async move { lock.holders_now().await },
            OnSignal::Detach,
            Some(self.name()),
        )
    }

    /// As `holders`, as an awaitable.
    fn holders_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        runtime::awaitable(
            py,
            async move { lock.holders_now().await },
            Some(self.name()),
        )
    }

    /// Whether the hold of `owner` may be lost and was not released since: found so, or its
    /// deadline passed (decided from the clock on the spot, no round trip).
    fn is_lost(&self, owner: u64) -> bool {
        self.lock.is_lost(Owner::new(owner))
    }

    fn __repr__(&self) -> String {
        format!("<crosslock._native.Lock {} {:?}>", self.kind(), self.name())
    }
}

/// What `Lock.acquire_async` resolves to: whether the lock was acquired and, if it was, the one
/// hold it won, given back (one `release_as(owner)`, in the background) unless claimed.
///
/// The Python layer claims it as soon as its `await` returns; any other fate (dropped by
/// the asyncio bridge or asyncio because the awaiting task was cancelled at that moment, or
/// `abandon()`ed) gives the hold back, so a cancelled `acquire_async` never leaves a hold that
/// nobody knows about (and that the watchdog would renew forever).
#[pyclass(module = "crosslock._native", name = "PendingHold", frozen)]
pub(crate) struct PyPendingHold {
    won: Won,
    hold: Mutex<Option<Unclaimed>>,
}

/// What an awaited acquire answered, as the Python layer reads it from `claim()`.
pub(crate) enum Won {
    /// A lock: `None` (not acquired) or the fencing token (0 for kinds without one).
    Token(Option<u64>),
    /// Semaphore permits: whether they were taken.
    Taken(bool),
    /// A permit-expirable semaphore's permit: its id, or `None`.
    Permit(Option<String>),
    /// A multi-lock: `None`, or the validity (seconds, with a lease) and the parts held.
    Multi(Option<(Option<f64>, Vec<String>)>),
}

impl Won {
    fn acquired(&self) -> bool {
        match self {
            Won::Token(t) => t.is_some(),
            Won::Taken(taken) => *taken,
            Won::Permit(id) => id.is_some(),
            Won::Multi(held) => held.is_some(),
        }
    }
}

impl PyPendingHold {
    fn new(acquired: Option<u64>, lock: Arc<dyn AnyLock>, owner: Owner) -> Self {
        Self::holding(Won::Token(acquired), async move {
            // NotHeld / LockLost: nothing left to give back.
            let _ = lock.release_as(owner).await;
        })
    }

    /// A result whose win (if `won` is one) is undone by `undo` unless claimed.
    pub(crate) fn holding(
        won: Won,
        undo: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Self {
        let hold = won.acquired().then(|| Unclaimed::new(undo));
        PyPendingHold {
            won,
            hold: Mutex::new(hold),
        }
    }

    fn take(&self) -> Option<Unclaimed> {
        self.hold.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn is_unclaimed(&self) -> bool {
        self.hold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

#[pymethods]
impl PyPendingHold {
    /// Takes the win over (it is the caller's to give back from now on); returns what the
    /// acquire answered: for a lock `None` or the token (0 for kinds without one), for semaphore
    /// permits `True`/`False`, for a permit `None` or its id. Later calls return the same and do
    /// nothing else.
    fn claim<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(hold) = self.take() {
            hold.claim();
        }
        match &self.won {
            Won::Token(t) => t.into_bound_py_any(py),
            Won::Taken(taken) => taken.into_bound_py_any(py),
            Won::Permit(id) => id.into_bound_py_any(py),
            Won::Multi(held) => held.into_bound_py_any(py),
        }
    }

    /// Gives a won, unclaimed hold back now (in the background); does nothing otherwise.
    fn abandon(&self) {
        drop(self.take());
    }

    fn __repr__(&self) -> String {
        let state = match (self.won.acquired(), self.is_unclaimed()) {
            (false, _) => "not acquired",
            (true, true) => "acquired, unclaimed",
            (true, false) => "acquired, claimed or abandoned",
        };
        format!("<crosslock._native.PendingHold {state}>")
    }
}

/// Core's remaining lease as Python seconds: `Duration::MAX` (no expiry) becomes `inf`.
fn lease_seconds(lease: Option<Duration>) -> Option<f64> {
    lease.map(|d| {
        if d == Duration::MAX {
            f64::INFINITY
        } else {
            d.as_secs_f64()
        }
    })
}
