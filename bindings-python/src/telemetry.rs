//! Core's telemetry into Python: a recorder that queues each event's measurements, and an
//! exporter that queues each ended span (core calls them on any thread, sometimes under its own
//! locks, so they must never wait for the GIL), and one dispatcher thread per client that hands
//! them to Python callables in batches, one GIL acquisition per batch. `crosslock/_telemetry.py`
//! records the measurements on the OpenTelemetry instruments of [`INSTRUMENTS`](instruments)
//! (core's table) and replays the spans on a tracer, under the OpenTelemetry context that was
//! current where each call was made ([`traced`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use crosslock::telemetry::{
    Event, Instrument, Measurement, Recorder, SpanData, SpanExporter, SpanLevel, SpanParent,
    SpanValue, Telemetry,
};
use futures::future::Either;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

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

/// What the dispatcher thread is sent.
enum Item {
    Measured(Owned),
    Ended(SpanData),
}

/// What the dispatcher thread is sent: an item, or `None` to end (after the items queued before
/// it).
type Sent = Option<Item>;

struct Queued {
    sender: mpsc::Sender<Sent>,
    /// Whether measurements are wanted (`connect(metrics=...)`), or only spans.
    metrics: bool,
    names: bool,
    /// [`FORKS`] when made.
    forks: u64,
}

impl Recorder for Queued {
    fn record(&self, event: &Event<'_>) {
        if !self.metrics || FORKS.load(Ordering::Relaxed) != self.forks {
            return;
        }
        for m in event.measurements() {
            let name = m.name.filter(|_| self.names).map(str::to_owned);
            // The dispatcher is gone only when the interpreter is: nothing left to tell.
            let _ = self.sender.send(Some(Item::Measured(Owned {
                measurement: m.unnamed(),
                name,
            })));
        }
    }
}

/// Ended spans to the dispatcher thread.
struct QueuedSpans {
    sender: mpsc::Sender<Sent>,
    forks: u64,
}

impl SpanExporter for QueuedSpans {
    fn export(&self, span: SpanData) {
        if FORKS.load(Ordering::Relaxed) == self.forks {
            let _ = self.sender.send(Some(Item::Ended(span)));
        }
    }
}

/// Whether a client of this process makes spans: only then do calls look up the caller's
/// OpenTelemetry context ([`traced`]).
static TRACING: AtomicBool = AtomicBool::new(false);

/// `opentelemetry.context.get_current`, once imported.
static GET_CURRENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `future` with the caller's OpenTelemetry context as the parent of the spans it makes, when a
/// client of this process makes spans (else `future` as it is). Called where a call is made (on
/// the caller's thread, in its coroutine), which is where Python knows the caller's context.
pub(crate) fn traced<F: Future>(
    py: Python<'_>,
    future: F,
) -> Either<F, impl Future<Output = F::Output> + use<F>> {
    if !TRACING.load(Ordering::Relaxed) {
        return Either::Left(future);
    }
    let current = GET_CURRENT
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("opentelemetry.context")?
                    .getattr("get_current")?
                    .unbind(),
            )
        })
        .and_then(|get| get.call0(py));
    match current {
        Ok(context) => Either::Right(crosslock::telemetry::with_span_parent(
            SpanParent::new(context),
            future,
        )),
        Err(_) => Either::Left(future),
    }
}

/// Nanoseconds since the epoch, as OpenTelemetry's Python API takes times.
fn nanos(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One span as it crosses to Python: `(name, kind, start ns, end ns, attributes, error or None,
/// children, caller's context or None)`; see `_telemetry._Spans`.
fn span_tuple<'py>(py: Python<'py>, span: &SpanData) -> PyResult<Bound<'py, PyTuple>> {
    let attributes = PyDict::new(py);
    for (key, value) in &span.attributes {
        match value {
            SpanValue::Str(s) => attributes.set_item(key, s)?,
            SpanValue::Int(i) => attributes.set_item(key, i)?,
            SpanValue::Float(f) => attributes.set_item(key, f)?,
            _ => {}
        }
    }
    let children = span
        .children
        .iter()
        .map(|c| span_tuple(py, c))
        .collect::<PyResult<Vec<_>>>()?;
    let parent = span
        .parent
        .as_ref()
        .and_then(|p| p.downcast_ref::<Py<PyAny>>())
        .map(|p| p.clone_ref(py));
    (
        span.name.as_str(),
        span.kind.as_str(),
        nanos(span.start),
        nanos(span.end),
        attributes,
        span.error.as_deref(),
        PyList::new(py, children)?,
        parent,
    )
        .into_pyobject(py)
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

/// Where a client's spans go: `sink(list of spans)` (see [`span_tuple`]), for the operations
/// `level` names, with the object's name as an attribute when `names`.
pub(crate) struct SpanSink {
    pub(crate) sink: Py<PyAny>,
    pub(crate) level: SpanLevel,
    pub(crate) names: bool,
}

/// Telemetry whose measurements go, in batches of tuples, to `metrics(batch)` and whose spans go
/// to `spans`'s sink, on a thread of its own (`crosslock-telemetry`), which ends at
/// [`Dispatcher::stop`] (or when the client is gone). `names`: whether each measurement carries
/// the object's name (else `None`).
pub(crate) fn telemetry(
    metrics: Option<Py<PyAny>>,
    names: bool,
    spans: Option<SpanSink>,
) -> PyResult<(Telemetry, Dispatcher)> {
    let forks = FORKS.load(Ordering::Relaxed);
    let (sender, receiver) = mpsc::channel::<Sent>();
    let metrics_on = metrics.is_some();
    let span_options = spans.as_ref().map(|s| (s.level, s.names));
    let span_sink = spans.map(|s| s.sink);
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
                    tell(py, metrics.as_ref(), span_sink.as_ref(), &batch);
                    // The spans' parents (Python contexts) are dropped here, with the GIL.
                    drop(std::mem::take(&mut batch));
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
    let mut telemetry = Telemetry::new(Queued {
        sender: sender.clone(),
        metrics: metrics_on,
        names,
        forks,
    });
    if let Some((level, names)) = span_options {
        TRACING.store(true, Ordering::Relaxed);
        let exporter = QueuedSpans {
            sender: sender.clone(),
            forks,
        };
        telemetry = telemetry.with_spans(exporter, level, names);
    }
    let dispatcher = Dispatcher {
        sender,
        thread,
        forks,
    };
    Ok((telemetry, dispatcher))
}

/// Hands one batch to the Python sinks: its measurements to `metrics`, its spans to `spans`.
fn tell(py: Python<'_>, metrics: Option<&Py<PyAny>>, spans: Option<&Py<PyAny>>, batch: &[Sent]) {
    let items = batch.iter().flatten();
    if let Some(sink) = metrics {
        let sink = sink.bind(py);
        let tuples = items.clone().filter_map(|item| match item {
            Item::Measured(o) => {
                let m = &o.measurement;
                let attributes = PyTuple::new(py, m.attributes()).expect("a tuple of pairs of str");
                Some((m.instrument.index(), m.value, attributes, o.name.as_deref()))
            }
            Item::Ended(_) => None,
        });
        let tuples: Vec<_> = tuples.collect();
        if !tuples.is_empty() {
            let result = PyList::new(py, tuples).and_then(|list| sink.call1((list,)));
            if let Err(e) = result {
                e.write_unraisable(py, Some(sink));
            }
        }
    }
    if let Some(sink) = spans {
        let sink = sink.bind(py);
        let ended = items
            .filter_map(|item| match item {
                Item::Ended(span) => Some(span_tuple(py, span)),
                Item::Measured(_) => None,
            })
            .collect::<PyResult<Vec<_>>>();
        let result = match ended {
            Ok(ended) if ended.is_empty() => Ok(()),
            Ok(ended) => PyList::new(py, ended).and_then(|list| sink.call1((list,)).map(drop)),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            e.write_unraisable(py, Some(sink));
        }
    }
}
