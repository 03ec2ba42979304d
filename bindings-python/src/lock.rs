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

use crosslock::{AcquireOptions, AnyLock, Owner, ffi};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::runtime::Unclaimed;
use crate::twins::{Named, cancel_by, py_twins};

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

impl Named for PyLock {
    fn lock_name(&self) -> Option<&str> {
        Some(self.name())
    }
}

py_twins! {
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

        /// Whether the hold of `owner` may be lost and was not released since: found so, or its
        /// deadline passed (decided from the clock on the spot, no round trip).
        fn is_lost(&self, owner: u64) -> bool {
            self.lock.is_lost(Owner::new(owner))
        }

        fn __repr__(&self) -> String {
            format!("<crosslock._native.Lock {} {:?}>", self.kind(), self.name())
        }
    }
    twins {
        /// Acquires for `owner` (blocking, GIL released, Ctrl-C honoured). `wait`: seconds, `None`
        /// waits without limit, `0` tries once. `lease`: seconds, `None` means watchdog renewal.
        /// Returns `None` when the wait limit passes (or raises `LockTimeoutError` if
        /// `raise_timeout`), else the fencing token (0 for kinds without one).
        #[pyo3(signature = (owner, wait = None, lease = None, raise_timeout = false))]
        cancel(token) hold(Won::Token) fn acquire | acquire_async (
            &self,
            py,
            owner: u64,
            wait: Option<f64>,
            lease: Option<f64>,
            raise_timeout: bool,
        ) -> Option<u64> {
            let owner = Owner::new(owner);
            let options = self.options(wait, lease).map_err(|e| self.err(py, e))?;
            let acquire = self.acquire_future(owner, cancel_by(options, token), raise_timeout);
            let lock = self.lock.clone();
            // A hold won just as Ctrl-C arrived, or never claimed, is given back.
            let undo = move |acquired: Option<u64>| async move {
                if acquired.is_some() {
                    // NotHeld / LockLost: nothing left to give back.
                    let _ = lock.release_as(owner).await;
                }
            };
            (acquire, undo)
        }

        /// Releases one hold of `owner`; `True` when that fully released the lock. Raises
        /// `NotHeldError` (Redis unchanged) or `LockLostError`.
        fn release | release_async (&self, py, owner: u64) -> bool {
            let lock = self.lock.clone();
            async move { lock.release_as(Owner::new(owner)).await }
        }

        /// Sets the lease of the hold of `owner` to `lease` seconds from now. Raises `NotHeldError`
        /// or `LockLostError`.
        fn extend | extend_async (&self, py, owner: u64, lease: f64) -> () {
            let lock = self.lock.clone();
            let lease = self.extend_lease(lease).map_err(|e| self.err(py, e))?;
            async move { lock.extend_as(Owner::new(owner), lease).await }
        }

        /// Deletes the lock whoever holds it; `True` if it was locked.
        fn force_unlock | force_unlock_async (&self, py) -> bool {
            let lock = self.lock.clone();
            async move { lock.force_unlock().await }
        }

        /// Whether anyone holds the lock.
        fn is_locked | is_locked_async (&self, py) -> bool {
            let lock = self.lock.clone();
            async move { lock.is_locked().await }
        }

        /// Whether `owner` of this client holds the lock.
        fn is_held_by | is_held_by_async (&self, py, owner: u64) -> bool {
            let lock = self.lock.clone();
            async move { Ok(lock.hold_count_of(Owner::new(owner)).await? > 0) }
        }

        /// How many times `owner` holds the lock (0 when it does not).
        fn hold_count_of | hold_count_of_async (&self, py, owner: u64) -> u32 {
            let lock = self.lock.clone();
            async move { lock.hold_count_of(Owner::new(owner)).await }
        }

        /// Seconds before the lock expires: `None` when unlocked, `inf` when it has no expiry.
        fn remaining_lease | remaining_lease_async (&self, py) -> Option<f64> {
            let lock = self.lock.clone();
            async move { lock.remaining_lease().await.map(lease_seconds) }
        }

        /// The current holder strings (`<client-uuid>:<n>`, `…:write`); empty when unlocked.
        fn holders | holders_async (&self, py) -> Vec<String> {
            let lock = self.lock.clone();
            async move { lock.holders_now().await }
        }
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
