//! Core's telemetry into Python: a recorder that queues each event's measurements (core calls it
//! on any thread, sometimes under its own locks, so it must never wait for the GIL) and one
//! dispatcher thread per client that hands them to a Python callable in batches, one GIL
//! acquisition per batch. `crosslock/_telemetry.py` records them on the OpenTelemetry
//! instruments of [`INSTRUMENTS`](instruments) (core's table).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crosslock::telemetry::{Event, Instrument, Measurement, Recorder, Telemetry};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// How many measurements one call of the Python callable gets at most.
const BATCH: usize = 512;

/// `_native.TELEMETRY_INSTRUMENTS`: core's instruments, by index, as `(name, kind, unit,
/// description, bounds, attribute keys)`; kind is `histogram`, `counter` or `up_down_counter`.
pub(crate) fn instruments(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let rows = Instrument::ALL.iter().map(|i| {
        (
            i.name(),
            i.kind().as_str(),
            i.unit(),
            i.description(),
            PyTuple::new(py, i.bounds()).expect("a tuple of floats"),
            PyTuple::new(py, i.attributes()).expect("a tuple of str"),
        )
    });
    PyTuple::new(py, rows.collect::<Vec<_>>())
}

/// One measurement as it crosses to Python: `(instrument index, value, attributes, name or
/// None)`, the attributes a tuple of `(key, value)` pairs in the instrument's key order.
struct Owned {
    measurement: Measurement<'static>,
    name: Option<String>,
}

/// How many forks this process descends from ([`after_fork`]): a forked child's recorder, whose
/// thread stayed behind in the parent, drops its events rather than queue them for no one.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Called in a forked child (`os.register_at_fork`).
pub(crate) fn after_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// What the dispatcher thread is sent: a measurement, or `None` to end (after the measurements
/// queued before it).
type Sent = Option<Owned>;

struct Queued {
    sender: mpsc::Sender<Sent>,
    names: bool,
    /// [`FORKS`] when made.
    forks: u64,
}

impl Recorder for Queued {
    fn record(&self, event: &Event<'_>) {
        if FORKS.load(Ordering::Relaxed) != self.forks {
            return;
        }
        for m in event.measurements() {
            let name = m.name.filter(|_| self.names).map(str::to_owned);
            // The dispatcher is gone only when the interpreter is: nothing left to tell.
            let _ = self.sender.send(Some(Owned {
                measurement: m.unnamed(),
                name,
            }));
        }
    }
}

/// The thread of one client's telemetry, stopped by its `close`.
pub(crate) struct Dispatcher {
    sender: mpsc::Sender<Sent>,
    thread: JoinHandle<()>,
    /// [`FORKS`] when started: a forked child's copy names a thread it does not have.
    forks: u64,
}

impl Dispatcher {
    /// Asks the thread to end once it has told what was queued before; its handle to join, if
    /// the thread is this process's.
    pub(crate) fn stop(self) -> Option<JoinHandle<()>> {
        if FORKS.load(Ordering::Relaxed) != self.forks {
            return None;
        }
        let _ = self.sender.send(None);
        Some(self.thread)
    }
}

/// Telemetry whose measurements go, in batches of tuples, to `sink(batch)` on a thread of its own
/// (`crosslock-telemetry`), which ends at [`Dispatcher::stop`] (or when the client is gone).
/// `names`: whether each measurement carries the object's name (else `None`).
pub(crate) fn telemetry(sink: Py<PyAny>, names: bool) -> PyResult<(Telemetry, Dispatcher)> {
    let forks = FORKS.load(Ordering::Relaxed);
    let (sender, receiver) = mpsc::channel::<Sent>();
    let thread = std::thread::Builder::new()
        .name("crosslock-telemetry".into())
        .spawn(move || {
            let mut stopping = false;
            while let Ok(first) = receiver.recv() {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match receiver.try_recv() {
                        Ok(event) => batch.push(event),
                        Err(_) => break,
                    }
                }
                if let Some(at) = batch.iter().position(Option::is_none) {
                    batch.truncate(at);
                    stopping = true;
                }
                if batch.is_empty() {
                    return;
                }
                // `try_attach`: nothing to tell once the interpreter is shutting down.
                let told = Python::try_attach(|py| {
                    let sink = sink.bind(py);
                    let tuples = batch.iter().flatten().map(|o| {
                        let m = &o.measurement;
                        let attributes =
                            PyTuple::new(py, m.attributes()).expect("a tuple of pairs of str");
                        (m.instrument.index(), m.value, attributes, o.name.as_deref())
                    });
                    let result = PyList::new(py, tuples).and_then(|list| sink.call1((list,)));
                    if let Err(e) = result {
                        e.write_unraisable(py, Some(sink));
                    }
                });
                if told.is_none() || stopping {
                    return;
                }
            }
        })
        .map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!(
                "crosslock: cannot start the telemetry thread: {e}"
            ))
        })?;
    let queued = Queued {
        sender: sender.clone(),
        names,
        forks,
    };
    let dispatcher = Dispatcher {
        sender,
        thread,
        forks,
    };
    Ok((Telemetry::new(queued), dispatcher))
}
