//! `crosslock._native.Client`: core's [`crosslock::Client`] for Python.

use std::sync::Arc;
use std::sync::mpsc;

use crosslock::{Backoff, Client, ClientOptions, LostLock, ReplicaSync, ffi};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::inspect::PyInspection;
use crate::lock::PyLock;
use crate::runtime::{self, OnSignal};
use crate::twins::{Named, py_twins};
use crate::watch::PyWatch;

/// A back-off from the Python layer's tuple form.
fn backoff_of(name: &str, kind: &str, a: f64, b: Option<f64>) -> crosslock::Result<Backoff> {
    let what = |w: &str| format!("the {w} back-off pause of spin lock '{name}'");
    match (kind, b) {
        ("constant", None) => Ok(Backoff::constant(ffi::duration(a, 1.0, &what("constant"))?)),
        ("exponential", Some(b)) => Ok(Backoff::exponential(
            ffi::duration(a, 1.0, &what("initial"))?,
            ffi::duration(b, 1.0, &what("maximum"))?,
        )),
        _ => Err(ffi::invalid(format!(
            "spin lock '{name}': a back-off is ('constant', pause) or ('exponential', initial, max), got {kind:?}"
        ))),
    }
}

/// A connection to one Redis deployment with its own client id (core's `Client`).
///
/// Made by `Client.connect` / `Client.connect_async`; the public wrapper is `crosslock.Client`.
#[pyclass(module = "crosslock._native", name = "Client", frozen)]
pub(crate) struct PyClient {
    client: Client,
    /// The lost-lock dispatcher thread and the process that started it, joined by `close` (core
    /// drops the listener, and with it the thread's channel, when the client closes).
    dispatcher: std::sync::Mutex<Option<(u32, std::thread::JoinHandle<()>)>>,
    /// The telemetry thread (`connect(metrics=...)`), stopped and joined by `close`.
    telemetry: std::sync::Mutex<Option<crate::telemetry::Dispatcher>>,
}

impl PyClient {
    fn new(client: Client, telemetry: Option<crate::telemetry::Dispatcher>) -> Self {
        PyClient {
            client,
            dispatcher: std::sync::Mutex::new(None),
            telemetry: std::sync::Mutex::new(telemetry),
        }
    }

    /// Asks the telemetry thread, if any, to end once it has told what was queued; its handle
    /// to join.
    fn stop_telemetry(&self) -> Option<std::thread::JoinHandle<()>> {
        let dispatcher = self
            .telemetry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        dispatcher.stop()
    }

    /// The dispatcher thread, if it is this process's: a forked child's copy of the parent's
    /// handle names a thread that does not exist here, and is never joined nor detached.
    fn take_dispatcher(&self) -> Option<std::thread::JoinHandle<()>> {
        let taken = self
            .dispatcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match taken {
            Some((pid, thread)) if pid == std::process::id() => Some(thread),
            Some(foreign) => {
                std::mem::forget(foreign);
                None
            }
            None => None,
        }
    }
}

/// Core's options from `connect()`'s keyword arguments: each one left `None` keeps core's default
/// (`ClientOptions::default()`, and `ReplicaSync::DEFAULT_TIMEOUT` for the replica wait).
#[allow(clippy::too_many_arguments)] // one parameter per keyword argument of connect()
fn options(
    connect_timeout: Option<f64>,
    response_timeout: Option<f64>,
    watchdog_timeout: Option<f64>,
    fair_lock_wait_timeout: Option<f64>,
    tls_ca_cert: Option<Vec<u8>>,
    wait_for_replicas: Option<u32>,
    replica_wait_timeout: Option<f64>,
    client_name: Option<String>,
    lanes: Option<&str>,
    telemetry: Option<crosslock::telemetry::Telemetry>,
) -> crosslock::Result<ClientOptions> {
    let secs = |value: f64, what: &str| ffi::duration(value, 1.0, what);
    let mut options = ClientOptions::new();
    if let Some(s) = connect_timeout {
        options = options.connect_timeout(secs(s, "connect_timeout")?);
    }
    if let Some(s) = response_timeout {
        options = options.response_timeout(secs(s, "response_timeout")?);
    }
    if let Some(s) = watchdog_timeout {
        options = options.watchdog_timeout(secs(s, "watchdog_timeout")?);
    }
    if let Some(s) = fair_lock_wait_timeout {
        options = options.fair_lock_wait_timeout(secs(s, "fair_lock_wait_timeout")?);
    }
    if let Some(pem) = tls_ca_cert {
        options = options.tls_ca_cert(pem);
    }
    if let Some(replicas) = wait_for_replicas {
        let wait = match replica_wait_timeout {
            Some(s) => secs(s, "replica_wait_timeout")?,
            None => ReplicaSync::DEFAULT_TIMEOUT,
        };
        options = options.wait_for_replicas(replicas, wait);
    }
    if let Some(name) = client_name {
        options = options.client_name(name);
    }
    if let Some(lanes) = lanes {
        options = options.lanes(crosslock::Lanes::from_name(lanes)?);
    }
    if let Some(telemetry) = telemetry {
        options = options.telemetry(telemetry);
    }
    Ok(options)
}

/// Core's defaults of `connect()`'s durations in seconds, by keyword (`_native.CONNECT_DEFAULTS`),
/// so the package spells none of its own.
pub(crate) fn connect_defaults() -> [(&'static str, f64); 5] {
    let d = ClientOptions::default();
    [
        ("connect_timeout", d.connect_timeout.as_secs_f64()),
        ("response_timeout", d.response_timeout.as_secs_f64()),
        ("watchdog_timeout", d.watchdog_timeout.as_secs_f64()),
        (
            "fair_lock_wait_timeout",
            d.fair_lock_wait_timeout.as_secs_f64(),
        ),
        (
            "replica_wait_timeout",
            ReplicaSync::DEFAULT_TIMEOUT.as_secs_f64(),
        ),
    ]
}

impl Named for PyClient {
    /// A client's errors name no lock.
    fn lock_name(&self) -> Option<&str> {
        None
    }
}

/// The telemetry of `connect(telemetry=sink)`: events to `sink` in batches on a thread of their
/// own (see [`crate::telemetry`]).
/// `spans`: `(sink, every, names)`, spans to `sink`, at the level `all` when `every`.
fn telemetry_of(
    sink: Option<Py<PyAny>>,
    names: bool,
    spans: Option<(Py<PyAny>, bool, bool)>,
) -> PyResult<(
    Option<crosslock::telemetry::Telemetry>,
    Option<crate::telemetry::Dispatcher>,
)> {
    if sink.is_none() && spans.is_none() {
        return Ok((None, None));
    }
    let spans = spans.map(|(sink, every, names)| crate::telemetry::SpanSink {
        sink,
        level: if every {
            crosslock::telemetry::SpanLevel::All
        } else {
            crosslock::telemetry::SpanLevel::Acquires
        },
        names,
    });
    let (telemetry, dispatcher) = crate::telemetry::telemetry(sink, names, spans)?;
    Ok((Some(telemetry), Some(dispatcher)))
}

py_twins! {
    impl PyClient {
        /// Connects (blocking, GIL released). Raises `RedisUnavailableError` naming `host:port` when
        /// the server cannot be reached within `connect_timeout` seconds. An option left `None`
        /// keeps core's default (`CONNECT_DEFAULTS`, `DEFAULT_LANES`).
        #[staticmethod]
        #[pyo3(signature = (url, connect_timeout = None, response_timeout = None, watchdog_timeout = None, fair_lock_wait_timeout = None, tls_ca_cert = None, wait_for_replicas = None, replica_wait_timeout = None, client_name = None, lanes = None, telemetry = None, telemetry_names = false, spans = None))]
        #[allow(clippy::too_many_arguments)] // one parameter per keyword argument of connect()
        fn connect(
            py: Python<'_>,
            url: String,
            connect_timeout: Option<f64>,
            response_timeout: Option<f64>,
            watchdog_timeout: Option<f64>,
            fair_lock_wait_timeout: Option<f64>,
            tls_ca_cert: Option<Vec<u8>>,
            wait_for_replicas: Option<u32>,
            replica_wait_timeout: Option<f64>,
            client_name: Option<String>,
            lanes: Option<&str>,
            telemetry: Option<Py<PyAny>>,
            telemetry_names: bool,
            spans: Option<(Py<PyAny>, bool, bool)>,
        ) -> PyResult<PyClient> {
            let (recorder, dispatcher) = telemetry_of(telemetry, telemetry_names, spans)?;
            let options = options(
                connect_timeout,
                response_timeout,
                watchdog_timeout,
                fair_lock_wait_timeout,
                tls_ca_cert,
                wait_for_replicas,
                replica_wait_timeout,
                client_name,
                lanes,
                recorder,
            )
            .map_err(|e| to_py_err(py, e, None))?;
            let client = runtime::wait(
                py,
                async move { Client::connect_with(&url, options).await },
                OnSignal::Detach,
                None,
            )?;
            Ok(PyClient::new(client, dispatcher))
        }

        /// As `connect`, as an awaitable.
        #[staticmethod]
        #[pyo3(signature = (url, connect_timeout = None, response_timeout = None, watchdog_timeout = None, fair_lock_wait_timeout = None, tls_ca_cert = None, wait_for_replicas = None, replica_wait_timeout = None, client_name = None, lanes = None, telemetry = None, telemetry_names = false, spans = None))]
        #[allow(clippy::too_many_arguments)] // one parameter per keyword argument of connect()
        fn connect_async<'py>(
            py: Python<'py>,
            url: String,
            connect_timeout: Option<f64>,
            response_timeout: Option<f64>,
            watchdog_timeout: Option<f64>,
            fair_lock_wait_timeout: Option<f64>,
            tls_ca_cert: Option<Vec<u8>>,
            wait_for_replicas: Option<u32>,
            replica_wait_timeout: Option<f64>,
            client_name: Option<String>,
            lanes: Option<&str>,
            telemetry: Option<Py<PyAny>>,
            telemetry_names: bool,
            spans: Option<(Py<PyAny>, bool, bool)>,
        ) -> PyResult<Bound<'py, PyAny>> {
            let (recorder, dispatcher) = telemetry_of(telemetry, telemetry_names, spans)?;
            let options = options(
                connect_timeout,
                response_timeout,
                watchdog_timeout,
                fair_lock_wait_timeout,
                tls_ca_cert,
                wait_for_replicas,
                replica_wait_timeout,
                client_name,
                lanes,
                recorder,
            )
            .map_err(|e| to_py_err(py, e, None))?;
            runtime::awaitable(
                py,
                async move {
                    let client = Client::connect_with(&url, options).await?;
                    Ok(PyClient::new(client, dispatcher))
                },
                None,
            )
        }

        /// The client id in this process (a UUID v4; a forked child gets a new one).
        #[getter]
        fn id(&self) -> String {
            self.client.id()
        }

        /// `host:port` of the server (never the password).
        #[getter]
        fn address(&self) -> String {
            self.client.address().to_owned()
        }

        /// Whether `close` was called.
        #[getter]
        fn closed(&self) -> bool {
            self.client.is_closed()
        }

        /// The holder string `<client-uuid>:<owner>`.
        fn holder(&self, owner: u64) -> String {
            self.client.holder(crosslock::Owner::new(owner))
        }

        /// `inspect` with core's text forms: `(inspection, description, one-line summary)`, the
        /// description judging liveness against `watchdog_timeout` seconds (the `crosslock` command).
        fn describe(
            &self,
            py: Python<'_>,
            name: String,
            watchdog_timeout: f64,
        ) -> PyResult<(PyInspection, String, String)> {
            let watchdog = ffi::duration(watchdog_timeout, 1.0, "watchdog_timeout")
                .map_err(|e| to_py_err(py, e, None))?;
            let client = self.client.clone();
            runtime::wait(
                py,
                async move {
                    let seen = client.inspect(&name).await?;
                    let (text, line) = (seen.describe(watchdog), seen.summary());
                    Ok((PyInspection(seen), text, line))
                },
                OnSignal::Detach,
                None,
            )
        }

        /// Deletes the lock at `name` whatever its kind; `True` if one was deleted.
        fn force_unlock_any(&self, py: Python<'_>, name: String) -> PyResult<bool> {
            let client = self.client.clone();
            runtime::wait(
                py,
                async move { client.force_unlock_any(&name).await },
                OnSignal::Detach,
                None,
            )
        }

        /// Starts following the object at `name` live, a snapshot at least every `interval` seconds.
        fn watch(&self, py: Python<'_>, name: String, interval: f64) -> PyResult<PyWatch> {
            crate::watch::start(py, self.client.clone(), name, interval)
        }

        /// As `watch`, as an awaitable.
        fn watch_async<'py>(
            &self,
            py: Python<'py>,
            name: String,
            interval: f64,
        ) -> PyResult<Bound<'py, PyAny>> {
            crate::watch::start_async(py, self.client.clone(), name, interval)
        }

        /// A `Lock` (Redisson `RLock`) named `name`. Raises `InvalidArgumentError` for an empty name.
        fn lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
            self.erased(py, name, self.client.lock(name).map(|l| l.erased()))
        }

        /// A `FairLock` (Redisson `RFairLock`) named `name`.
        fn fair_lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
            self.erased(py, name, self.client.fair_lock(name).map(|l| l.erased()))
        }

        /// A `SpinLock` (Redisson `RSpinLock`) named `name`; `backoff` is `None` (Redisson's default,
        /// 1 ms doubling to 128 ms), `("exponential", initial, max)` or `("constant", pause)`, seconds.
        #[pyo3(signature = (name, backoff = None))]
        fn spin_lock(
            &self,
            py: Python<'_>,
            name: &str,
            backoff: Option<(String, f64, Option<f64>)>,
        ) -> PyResult<PyLock> {
            let backoff = match backoff {
                None => Ok(Backoff::default()),
                Some((kind, a, b)) => backoff_of(name, &kind, a, b),
            };
            let lock = backoff
                .and_then(|b| self.client.spin_lock_with(name, b))
                .map(|l| l.erased());
            self.erased(py, name, lock)
        }

        /// A `FencedLock` (Redisson `RFencedLock`) named `name`.
        fn fenced_lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
            self.erased(py, name, self.client.fenced_lock(name).map(|l| l.erased()))
        }

        /// A `NonReentrantLock` named `name`.
        fn non_reentrant_lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
            self.erased(
                py,
                name,
                self.client.non_reentrant_lock(name).map(|l| l.erased()),
            )
        }

        /// A `NonReentrantFairLock` (Redisson's non-reentrant fair lock) named `name`.
        fn non_reentrant_fair_lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
            self.erased(
                py,
                name,
                self.client
                    .non_reentrant_fair_lock(name)
                    .map(|l| l.erased()),
            )
        }

        /// A `GroupLock` (Redisson's `getMultiLock(group, values)`) on `values` of `group`, their
        /// fields hashed from the `codec` ("kryo5" or "string") encoding; with the values' fields,
        /// sorted (the lost-event route of its holds is `group#field,field…`).
        fn group_lock(
            &self,
            py: Python<'_>,
            group: &str,
            values: Vec<String>,
            codec: &str,
        ) -> PyResult<(PyLock, Vec<String>)> {
            let lock = crosslock::GroupCodec::from_name(codec)
                .and_then(|codec| self.client.group_lock_with(group, &values, codec));
            let fields = lock
                .as_ref()
                .map(|l| l.fields().to_vec())
                .unwrap_or_default();
            Ok((self.erased(py, group, lock.map(|l| l.erased()))?, fields))
        }

        /// A `Semaphore` (Redisson `RSemaphore`) named `name`.
        fn semaphore(&self, py: Python<'_>, name: &str) -> PyResult<crate::semaphore::PySemaphore> {
            let sem = self
                .client
                .semaphore(name)
                .map_err(|e| to_py_err(py, e, Some(name)))?;
            Ok(crate::semaphore::PySemaphore::new(sem))
        }

        /// A `PermitExpirableSemaphore` (Redisson `RPermitExpirableSemaphore`) named `name`.
        fn permit_expirable_semaphore(
            &self,
            py: Python<'_>,
            name: &str,
        ) -> PyResult<crate::permit_expirable_semaphore::PyPermitExpirableSemaphore> {
            let sem = self
                .client
                .permit_expirable_semaphore(name)
                .map_err(|e| to_py_err(py, e, Some(name)))?;
            Ok(crate::permit_expirable_semaphore::PyPermitExpirableSemaphore::new(sem))
        }

        /// A `CountDownLatch` (Redisson `RCountDownLatch`) named `name`.
        fn count_down_latch(
            &self,
            py: Python<'_>,
            name: &str,
        ) -> PyResult<crate::count_down_latch::PyCountDownLatch> {
            let latch = self
                .client
                .count_down_latch(name)
                .map_err(|e| to_py_err(py, e, Some(name)))?;
            Ok(crate::count_down_latch::PyCountDownLatch::new(latch))
        }

        /// The read and the write lock of the `ReadWriteLock` (Redisson `RReadWriteLock`) `name`.
        fn read_write_lock(&self, py: Python<'_>, name: &str) -> PyResult<(PyLock, PyLock)> {
            let rw = self
                .client
                .read_write_lock(name)
                .map_err(|e| to_py_err(py, e, Some(name)))?;
            Ok((
                PyLock::new(rw.read().erased()),
                PyLock::new(rw.write().erased()),
            ))
        }

        /// Closes: pending acquires fail, held locks are released, renewal stops. Idempotent.
        ///
        /// After the last client's close (once its calls in flight have ended) core's runtime shuts
        /// down; this waits, with the GIL released, until its threads and this client's lost-lock
        /// dispatcher are joined, so that a `fork()` right after finds none of them.
        fn close(&self, py: Python<'_>) -> PyResult<()> {
            let client = self.client.clone();
            runtime::wait(
                py,
                async move {
                    client.close().await;
                    Ok(())
                },
                OnSignal::Detach,
                None,
            )?;
            let dispatcher = self.take_dispatcher();
            // Not when `close` runs on that thread (a lost-lock callback): it ends once it returns.
            let dispatcher =
                dispatcher.filter(|thread| thread.thread().id() != std::thread::current().id());
            // Every event of the close (the holds it released) is queued by now: told before
            // the thread ends, so before `close` returns.
            let telemetry = self
                .stop_telemetry()
                .filter(|thread| thread.thread().id() != std::thread::current().id());
            py.detach(move || {
                crosslock::runtime::settle();
                if let Some(dispatcher) = dispatcher {
                    let _ = dispatcher.join();
                }
                if let Some(telemetry) = telemetry {
                    let _ = telemetry.join();
                }
                // No client left in the process: the log bridge's thread goes too (the next event
                // starts it again).
                if !crosslock::runtime::is_running()
                    && let Some(bridge) = crate::logging::stop_dispatcher()
                    && bridge.thread().id() != std::thread::current().id()
                {
                    let _ = bridge.join();
                }
            });
            Ok(())
        }

        /// As `close`, as an awaitable.
        fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let client = self.client.clone();
            let telemetry = self.telemetry.lock().unwrap_or_else(|e| e.into_inner()).take();
            runtime::awaitable(
                py,
                async move {
                    client.close().await;
                    // The thread tells what the close queued, then ends (not joined: this is
                    // the event loop's thread).
                    drop(telemetry.and_then(crate::telemetry::Dispatcher::stop));
                    Ok(())
                },
                None,
            )
        }

        /// Sets the function called as `listener(name, owner, kind, holder)` on a background thread whenever
        /// a hold of this client is found lost. Replaces any previous listener. Call it again in a
        /// forked child (the dispatcher thread does not survive a fork).
        fn set_lost_listener(&self, listener: Py<PyAny>) -> PyResult<()> {
            // Core calls the listener on a runtime thread, which must never wait for the GIL: events
            // go through a channel to one dispatcher thread per client, which calls Python.
            let (sender, receiver) = mpsc::channel::<LostLock>();
            let dispatcher = std::thread::Builder::new()
                .name("crosslock-lost".into())
                .spawn(move || {
                    // Ends when the client (and with it the sender) is dropped or replaced.
                    while let Ok(lost) = receiver.recv() {
                        // `try_attach`: nothing to tell once the interpreter is shutting down.
                        let done = Python::try_attach(|py| {
                            let listener = listener.bind(py);
                            let args = (
                                lost.name.as_str(),
                                // A permit has none: the host finds it by its id.
                                lost.owner.map_or(0, crosslock::Owner::get),
                                lost.kind.as_str(),
                                lost.holder.as_str(),
                            );
                            if let Err(e) = listener.call1(args) {
                                e.write_unraisable(py, Some(listener));
                            }
                        });
                        if done.is_none() {
                            return;
                        }
                    }
                })
                .map_err(|e| {
                    pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "crosslock: cannot start the lost-lock dispatcher thread: {e}"
                    ))
                })?;
            // The one it replaces (if any) ends by itself once core drops its listener below.
            drop(self.take_dispatcher());
            *self.dispatcher.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((std::process::id(), dispatcher));
            let sender = std::sync::Mutex::new(sender);
            self.client.on_lock_lost(move |lost: LostLock| {
                let _ = sender.lock().unwrap_or_else(|e| e.into_inner()).send(lost);
            });
            Ok(())
        }

        /// How many channels the shared subscription connection listens to (diagnostics, tests).
        fn subscribed_channels(&self) -> usize {
            self.client.subscribed_channels()
        }

        /// How many holds the watchdog renews (diagnostics, tests).
        fn watched_locks(&self) -> usize {
            self.client.watched_locks()
        }

        fn __repr__(&self) -> String {
            format!("<crosslock._native.Client {:?}>", self.client)
        }
    }
    twins {
        /// What lives at `name`, as a dict (blocking, GIL released).
        fn inspect | inspect_async (&self, py, name: String) -> PyInspection {
            let client = self.client.clone();
            async move { client.inspect(&name).await.map(PyInspection) }
        }

        /// The names of objects matching `pattern` (SCAN), sorted, at most `limit`.
        fn scan | scan_async (&self, py, pattern: String, limit: usize) -> Vec<String> {
            let client = self.client.clone();
            async move { client.scan(&pattern, limit).await }
        }
    }
}

impl PyClient {
    fn erased(
        &self,
        py: Python<'_>,
        name: &str,
        lock: crosslock::Result<Arc<dyn crosslock::AnyLock>>,
    ) -> PyResult<PyLock> {
        lock.map(PyLock::new)
            .map_err(|e| to_py_err(py, e, Some(name)))
    }
}
