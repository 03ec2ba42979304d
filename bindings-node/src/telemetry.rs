//! Core's telemetry into JavaScript: a recorder that queues each event's measurements, and an
//! exporter that queues each ended span (core calls them on any thread, sometimes under its own
//! locks, so they never wait for JavaScript), and asks the client's thread, through one weak
//! thread-safe function per queue, to take them: one JavaScript call per batch, however many were
//! queued since the last. `lib/telemetry.ts` records the measurements on the OpenTelemetry
//! instruments of [`telemetry_instruments`] (core's table) and replays the spans on a tracer,
//! under the OpenTelemetry context that was active where each call was made ([`traced`]).
//!
//! The thread-safe function is weak (it never keeps the event loop alive), and `close()` takes
//! what is left with [`Queue::take`] after core's close, then stops the queue: measurements after
//! that are dropped. A client never closed queues until it is collected or the process ends; the
//! queue keeps nothing alive.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::SystemTime;

use crosslock::telemetry::{
    Event, Instrument, Measurement, Recorder, SpanData, SpanExporter, SpanLevel, SpanParent,
    SpanValue, Telemetry,
};
use futures_util::future::Either as Either2;
use napi::Env;
use napi::bindgen_prelude::{Either, Function, FunctionRef};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

/// One instrument of core's table, as `telemetryInstruments()` lists them.
#[napi(object)]
pub struct TelemetryInstrument {
    /// e.g. `crosslock.lock.wait.duration`.
    pub name: String,
    /// `'histogram'`, `'counter'` or `'up_down_counter'`.
    #[napi(ts_type = "'histogram' | 'counter' | 'up_down_counter'")]
    pub kind: String,
    /// UCUM unit: `s`, `{hold}`, …
    pub unit: String,
    pub description: String,
    /// A histogram's bucket bounds, in seconds (empty for counters).
    pub bounds: Vec<f64>,
    /// The attribute keys its measurements carry, in order (besides `crosslock.lock.name`).
    pub attributes: Vec<String>,
}

/// Core's instruments (`crosslock::telemetry::Instrument::ALL`), by index: what a measurement's
/// `instrument` names.
#[napi]
pub fn telemetry_instruments() -> Vec<TelemetryInstrument> {
    Instrument::ALL
        .iter()
        .map(|i| TelemetryInstrument {
            name: i.name().to_owned(),
            kind: i.kind().as_str().to_owned(),
            unit: i.unit().to_owned(),
            description: i.description().to_owned(),
            bounds: i.bounds().to_vec(),
            attributes: i.attributes().iter().map(|a| (*a).to_owned()).collect(),
        })
        .collect()
}

/// One measurement as it crosses to JavaScript.
#[napi(object)]
pub struct TelemetryMeasurement {
    /// Its index in `telemetryInstruments()`.
    pub instrument: u32,
    pub value: f64,
    /// Its attributes as `[key, value, key, value, …]`, in the instrument's key order.
    pub attributes: Vec<String>,
    /// The object's name, only when connected with `metricsWithNames`.
    pub name: Option<String>,
}

/// One measurement as queued: core's, without its name, and the name if it is to cross.
pub(crate) struct Owned {
    measurement: Measurement<'static>,
    name: Option<String>,
}

impl Owned {
    fn into_js(self) -> TelemetryMeasurement {
        let m = self.measurement;
        TelemetryMeasurement {
            instrument: m.instrument.index() as u32,
            value: m.value,
            attributes: m
                .attributes()
                .iter()
                .flat_map(|(k, v)| [(*k).to_owned(), (*v).to_owned()])
                .collect(),
            name: self.name,
        }
    }
}

type Tick<T> = ThreadsafeFunction<(), (), Vec<T>, napi::Status, false, true>;

/// What a recorder (or exporter) and the client's thread share: items queued on any thread,
/// taken on the client's.
pub(crate) struct Queue<T> {
    sender: mpsc::Sender<T>,
    /// Taken only on the client's thread (the tick and `close()`); the recorder never locks it.
    receiver: Mutex<mpsc::Receiver<T>>,
    /// Whether a tick is on its way: the recorder calls the thread-safe function only when not.
    scheduled: AtomicBool,
    /// Set by `close()`: nothing more is queued.
    stopped: AtomicBool,
}

impl<T> Queue<T> {
    fn new() -> Arc<Self> {
        let (sender, receiver) = mpsc::channel();
        Arc::new(Queue {
            sender,
            receiver: Mutex::new(receiver),
            scheduled: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    /// Everything queued so far, on the client's thread.
    pub(crate) fn take(&self) -> Vec<T> {
        self.scheduled.store(false, Ordering::SeqCst);
        let receiver = self.receiver.lock().unwrap_or_else(|e| e.into_inner());
        receiver.try_iter().collect()
    }

    /// What is left, and nothing more after it (`close()`).
    pub(crate) fn stop(&self) -> Vec<T> {
        self.stopped.store(true, Ordering::SeqCst);
        self.take()
    }

    /// Queues `items` and, unless one is on its way, asks for a tick.
    fn push<J: napi::bindgen_prelude::ToNapiValue + 'static>(
        &self,
        items: impl IntoIterator<Item = T>,
        tick: &Tick<J>,
    ) {
        if self.stopped.load(Ordering::Relaxed) {
            return;
        }
        for item in items {
            // The receiver lives as long as the queue: a send cannot fail.
            let _ = self.sender.send(item);
        }
        if !self.scheduled.swap(true, Ordering::SeqCst) {
            // Non-blocking; a closing environment refuses the call, and there is no one to tell.
            let _ = tick.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    /// The thread-safe function that hands what is queued, made JavaScript by `js`, to `sink`.
    fn tick<J: napi::bindgen_prelude::ToNapiValue + 'static>(
        self: &Arc<Self>,
        sink: Function<'_, Vec<J>, ()>,
        js: fn(T) -> J,
    ) -> napi::Result<Tick<J>>
    where
        T: Send + 'static,
    {
        let taker = self.clone();
        sink.build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |_ctx| Ok(taker.take().into_iter().map(js).collect()))
    }
}

pub(crate) type Measurements = Queue<Owned>;

impl Measurements {
    /// The measurements queued so far, for JavaScript (`takeMeasurements`).
    pub(crate) fn take_js(&self, stop: bool) -> Vec<TelemetryMeasurement> {
        let taken = if stop { self.stop() } else { self.take() };
        taken.into_iter().map(Owned::into_js).collect()
    }
}

struct Queued {
    queue: Arc<Measurements>,
    tick: Option<Tick<TelemetryMeasurement>>,
    names: bool,
}

impl Recorder for Queued {
    fn record(&self, event: &Event<'_>) {
        let Some(tick) = &self.tick else { return };
        let owned = event.measurements().map(|m| Owned {
            name: m.name.filter(|_| self.names).map(str::to_owned),
            measurement: m.unnamed(),
        });
        self.queue.push(owned, tick);
    }
}

/// One ended span as it crosses to JavaScript.
#[napi(object)]
pub struct TelemetrySpan {
    /// `crosslock.acquire`, `EVALSHA lock/acquire`, …
    pub name: String,
    #[napi(ts_type = "'internal' | 'client'")]
    pub kind: String,
    /// When it began: `[seconds, nanoseconds]` since the epoch (OpenTelemetry's `HrTime`).
    #[napi(ts_type = "[number, number]")]
    pub start: Vec<u32>,
    /// When it ended, as `start`.
    #[napi(ts_type = "[number, number]")]
    pub end: Vec<u32>,
    /// Its attributes' keys, …
    pub attribute_keys: Vec<String>,
    /// … and their values, in the same order.
    pub attribute_values: Vec<Either<String, f64>>,
    /// Its error status's description, if it failed.
    pub error: Option<String>,
    /// The spans made inside it.
    pub children: Vec<TelemetrySpan>,
    /// The caller's context, as `capture` numbered it (a span no other of crosslock's contains).
    pub parent: Option<u32>,
}

/// `at` as OpenTelemetry's `HrTime`.
fn hr_time(at: SystemTime) -> Vec<u32> {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    vec![
        u32::try_from(since.as_secs()).unwrap_or(u32::MAX),
        since.subsec_nanos(),
    ]
}

fn span_js(span: SpanData) -> TelemetrySpan {
    let (attribute_keys, attribute_values) = span
        .attributes
        .into_iter()
        .filter_map(|(key, value)| {
            let value = match value {
                SpanValue::Str(s) => Either::A(s),
                SpanValue::Int(i) => Either::B(i as f64),
                SpanValue::Float(f) => Either::B(f),
                _ => return None,
            };
            Some((key.to_owned(), value))
        })
        .unzip();
    TelemetrySpan {
        name: span.name,
        kind: span.kind.as_str().to_owned(),
        start: hr_time(span.start),
        end: hr_time(span.end),
        attribute_keys,
        attribute_values,
        error: span.error,
        children: span.children.into_iter().map(span_js).collect(),
        parent: span
            .parent
            .as_ref()
            .and_then(|p| p.downcast_ref::<JsParent>())
            .map(|p| p.id),
    }
}

pub(crate) type Spans = Queue<SpanData>;

impl Spans {
    /// The spans queued so far, for JavaScript (`takeSpans`).
    pub(crate) fn take_js(&self, stop: bool) -> Vec<TelemetrySpan> {
        let taken = if stop { self.stop() } else { self.take() };
        taken.into_iter().map(span_js).collect()
    }
}

struct QueuedSpans {
    queue: Arc<Spans>,
    tick: Tick<TelemetrySpan>,
}

impl SpanExporter for QueuedSpans {
    fn export(&self, span: SpanData) {
        self.queue.push([span], &self.tick);
    }
}

/// The caller's context of a call made while spans are on: the number `capture` gave it in
/// JavaScript, which forgets it once no span can name it any more (this is dropped).
struct JsParent {
    id: u32,
    forgotten: Arc<Mutex<Vec<u32>>>,
}

impl Drop for JsParent {
    fn drop(&mut self) {
        self.forgotten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.id);
    }
}

/// Whether a client of this process makes spans: only then do calls ask for the caller's
/// context ([`traced`]).
static TRACING: AtomicBool = AtomicBool::new(false);

/// `capture(forgotten)`, which keeps the active OpenTelemetry context under a new number (and
/// forgets those numbered `forgotten`), and the numbers to forget, of this thread's environment.
type Capture = (FunctionRef<Vec<u32>, u32>, Arc<Mutex<Vec<u32>>>);

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// `work` with the caller's OpenTelemetry context as the parent of the spans it makes, when a
/// client of this thread makes spans (else `work` as it is). Called on the JavaScript thread as
/// the call is made: where the caller's context is the active one.
pub(crate) fn traced<F: Future>(
    env: &Env,
    work: F,
) -> Either2<F, impl Future<Output = F::Output> + use<F>> {
    if !TRACING.load(Ordering::Relaxed) {
        return Either2::Left(work);
    }
    let parent = CAPTURE.with(|capture| {
        let capture = capture.borrow();
        let (function, forgotten) = capture.as_ref()?;
        let gone = std::mem::take(&mut *forgotten.lock().unwrap_or_else(|e| e.into_inner()));
        let id = function.borrow_back(env).ok()?.call(gone).ok()?;
        Some(JsParent {
            id,
            forgotten: forgotten.clone(),
        })
    });
    match parent {
        Some(parent) => Either2::Right(crosslock::telemetry::with_span_parent(
            SpanParent::new(parent),
            work,
        )),
        None => Either2::Left(work),
    }
}

/// How a client's spans are made and told: to `sink(batch)` on this thread, `capture` numbering
/// the callers' contexts, for the operations `level` names, with object names when `names`.
pub(crate) struct SpanSink<'env> {
    pub(crate) sink: Function<'env, Vec<TelemetrySpan>, ()>,
    pub(crate) capture: Function<'env, Vec<u32>, u32>,
    pub(crate) level: SpanLevel,
    pub(crate) names: bool,
}

/// The telemetry of a client connected with metrics or spans: its measurements go, in batches,
/// to `metrics(batch)` on this thread (`names`: whether each carries the object's name), its
/// spans as `spans` says.
pub(crate) fn telemetry(
    metrics: Option<Function<'_, Vec<TelemetryMeasurement>, ()>>,
    names: bool,
    spans: Option<SpanSink<'_>>,
) -> napi::Result<(Telemetry, Arc<Measurements>, Option<Arc<Spans>>)> {
    let queue = Measurements::new();
    let tick = match metrics {
        Some(sink) => Some(queue.tick(sink, Owned::into_js)?),
        None => None,
    };
    let mut telemetry = Telemetry::new(Queued {
        queue: queue.clone(),
        tick,
        names,
    });
    let mut span_queue = None;
    if let Some(s) = spans {
        let queue = Spans::new();
        let tick = queue.tick(s.sink, span_js)?;
        let capture = s.capture.create_ref()?;
        CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            let forgotten = c.as_ref().map(|(_, f)| f.clone()).unwrap_or_default();
            *c = Some((capture, forgotten));
        });
        TRACING.store(true, Ordering::Relaxed);
        let exporter = QueuedSpans {
            queue: queue.clone(),
            tick,
        };
        telemetry = telemetry.with_spans(exporter, s.level, s.names);
        span_queue = Some(queue);
    }
    Ok((telemetry, queue, span_queue))
}
