//! `crosslock._native.Client`: core's [`crosslock::Client`] for Python.

use std::sync::Arc;

use crosslock::lock::duration_from_secs;
use crosslock::{Client, ClientOptions, LostLock};
use pyo3::prelude::*;

use crate::error::to_py_err;
use crate::lock::PyLock;
use crate::runtime::{self, OnSignal};

/// A connection to one Redis deployment with its own client id (core's `Client`).
///
/// Made by `Client.connect` / `Client.connect_async`; the public wrapper is `crosslock.Client`.
#[pyclass(module = "crosslock._native", name = "Client", frozen)]
pub(crate) struct PyClient {
    client: Client,
}

fn options(
    connect_timeout: f64,
    response_timeout: f64,
    watchdog_timeout: f64,
    tls_ca_cert: Option<Vec<u8>>,
) -> crosslock::Result<ClientOptions> {
    let mut options = ClientOptions::new()
        .connect_timeout(duration_from_secs(connect_timeout, "connect_timeout")?)
        .response_timeout(duration_from_secs(response_timeout, "response_timeout")?)
        .watchdog_timeout(duration_from_secs(watchdog_timeout, "watchdog_timeout")?);
    if let Some(pem) = tls_ca_cert {
        options = options.tls_ca_cert(pem);
    }
    Ok(options)
}

#[pymethods]
impl PyClient {
    /// Connects (blocking, GIL released). Raises `RedisUnavailableError` naming `host:port` when
    /// the server cannot be reached within `connect_timeout` seconds.
    #[staticmethod]
    #[pyo3(signature = (url, connect_timeout = 5.0, response_timeout = 3.0, watchdog_timeout = 30.0, tls_ca_cert = None))]
    fn connect(
        py: Python<'_>,
        url: String,
        connect_timeout: f64,
        response_timeout: f64,
        watchdog_timeout: f64,
        tls_ca_cert: Option<Vec<u8>>,
    ) -> PyResult<PyClient> {
        let options = options(
            connect_timeout,
            response_timeout,
            watchdog_timeout,
            tls_ca_cert,
        )
        .map_err(|e| to_py_err(py, e, None))?;
        let client = runtime::wait(
            py,
            async move { Client::connect_with(&url, options).await },
            OnSignal::Detach,
            None,
        )?;
        Ok(PyClient { client })
    }

    /// As `connect`, as an awaitable.
    #[staticmethod]
    #[pyo3(signature = (url, connect_timeout = 5.0, response_timeout = 3.0, watchdog_timeout = 30.0, tls_ca_cert = None))]
    fn connect_async(
        py: Python<'_>,
        url: String,
        connect_timeout: f64,
        response_timeout: f64,
        watchdog_timeout: f64,
        tls_ca_cert: Option<Vec<u8>>,
    ) -> PyResult<Bound<'_, PyAny>> {
        let options = options(
            connect_timeout,
            response_timeout,
            watchdog_timeout,
            tls_ca_cert,
        )
        .map_err(|e| to_py_err(py, e, None))?;
        runtime::awaitable(
            py,
            async move {
                Client::connect_with(&url, options)
                    .await
                    .map(|client| PyClient { client })
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

    /// A handle on the lock `name`. Raises `InvalidArgumentError` for an empty name.
    fn lock(&self, py: Python<'_>, name: &str) -> PyResult<PyLock> {
        let lock = self
            .client
            .lock(name)
            .map_err(|e| to_py_err(py, e, Some(name)))?;
        Ok(PyLock::new(lock))
    }

    /// Closes: pending acquires fail, held locks are released, renewal stops. Idempotent.
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
        )
    }

    /// As `close`, as an awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        runtime::awaitable(
            py,
            async move {
                client.close().await;
                Ok(())
            },
            None,
        )
    }

    /// Sets the function called as `listener(name, owner)` on a background thread whenever the
    /// watchdog finds a lock of this client gone. Replaces any previous listener.
    fn set_lost_listener(&self, listener: Py<PyAny>) {
        let listener = Arc::new(listener);
        self.client.on_lock_lost(move |lost: LostLock| {
            // Core calls this on a runtime thread: never wait for the GIL there.
            let listener = listener.clone();
            let _ = std::thread::Builder::new()
                .name("crosslock-lost".into())
                .spawn(move || {
                    // `try_attach`: nothing to tell once the interpreter is shutting down.
                    Python::try_attach(|py| {
                        let listener = listener.bind(py);
                        if let Err(e) = listener.call1((lost.name.as_str(), lost.owner.get())) {
                            e.write_unraisable(py, Some(listener));
                        }
                    });
                });
        });
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
