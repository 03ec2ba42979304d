//! Core's telemetry events into Python: a recorder that queues each event (core calls it on any
//! thread, sometimes under its own locks, so it must never wait for the GIL) and one dispatcher
//! thread per client that hands them to a Python callable in batches, one GIL acquisition per
//! batch. `crosslock/_telemetry.py` turns the batches into OpenTelemetry metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crosslock::telemetry::{Event, HoldEnd, Recorder, Telemetry};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// How many events one call of the Python callable gets at most.
const BATCH: usize = 512;

/// One event as it crosses to Python: `(what, object type, name or None, label or None,
/// seconds)`. `what` is `wait_began`, `wait_ended` (label: the outcome), `hold_began`,
/// `hold_ended` (label: `released`, or the reason a hold was lost: `lost:gone`,
/// `lost:expired`) or `woken` (label: the cause).
struct Owned {
    what: &'static str,
    object: &'static str,
    name: Option<String>,
    label: Option<&'static str>,
    seconds: f64,
}

/// How many forks this process descends from ([`after_fork`]): a forked child's recorder, whose
/// thread stayed behind in the parent, drops its events rather than queue them for no one.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Called in a forked child (`os.register_at_fork`).
pub(crate) fn after_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// What `what` says to end the thread (after the events queued before it).
const STOP: &str = "";

struct Queued {
    sender: mpsc::Sender<Owned>,
    names: bool,
    /// [`FORKS`] when made.
    forks: u64,
}

impl Queued {
    fn send(
        &self,
        what: &'static str,
        object: &'static str,
        name: &str,
        label: Option<&'static str>,
        seconds: f64,
    ) {
        if FORKS.load(Ordering::Relaxed) != self.forks {
            return;
        }
        let name = self.names.then(|| name.to_owned());
        // The dispatcher is gone only when the interpreter is: nothing left to tell.
        let _ = self.sender.send(Owned {
            what,
            object,
            name,
            label,
            seconds,
        });
    }
}

impl Recorder for Queued {
    fn record(&self, event: &Event<'_>) {
        match *event {
            Event::WaitBegan { object, name } => {
                self.send("wait_began", object.as_str(), name, None, 0.0);
            }
            Event::WaitEnded {
                object,
                name,
                outcome,
                waited,
            } => self.send(
                "wait_ended",
                object.as_str(),
                name,
                Some(outcome.as_str()),
                waited.as_secs_f64(),
            ),
            Event::HoldBegan { object, name } => {
                self.send("hold_began", object.as_str(), name, None, 0.0);
            }
            Event::HoldEnded {
                object,
                name,
                held,
                end,
            } => {
                let label = match end {
                    HoldEnd::Lost(reason) => reason.lost_label(),
                    _ => "released",
                };
                self.send(
                    "hold_ended",
                    object.as_str(),
                    name,
                    Some(label),
                    held.as_secs_f64(),
                );
            }
            Event::Woken { cause } => self.send("woken", "", "", Some(cause.as_str()), 0.0),
            _ => {}
        }
    }
}

/// The thread of one client's telemetry, stopped by its `close`.
pub(crate) struct Dispatcher {
    sender: mpsc::Sender<Owned>,
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
        let _ = self.sender.send(Owned {
            what: STOP,
            object: "",
            name: None,
            label: None,
            seconds: 0.0,
        });
        Some(self.thread)
    }
}

/// Telemetry whose events go, in batches of tuples, to `sink(batch)` on a thread of its own
/// (`crosslock-telemetry`), which ends at [`Dispatcher::stop`] (or when the client is gone).
/// `names`: whether each event carries the object's name (else `None`).
pub(crate) fn telemetry(sink: Py<PyAny>, names: bool) -> PyResult<(Telemetry, Dispatcher)> {
    let forks = FORKS.load(Ordering::Relaxed);
    let (sender, receiver) = mpsc::channel::<Owned>();
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
                if let Some(at) = batch.iter().position(|e| e.what == STOP) {
                    batch.truncate(at);
                    stopping = true;
                }
                if batch.is_empty() {
                    return;
                }
                // `try_attach`: nothing to tell once the interpreter is shutting down.
                let told = Python::try_attach(|py| {
                    let sink = sink.bind(py);
                    let tuples = batch
                        .iter()
                        .map(|e| (e.what, e.object, e.name.as_deref(), e.label, e.seconds));
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
