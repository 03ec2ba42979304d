//! Core's telemetry into JavaScript: a recorder that queues each event's measurements (core calls
//! it on any thread, sometimes under its own locks, so it never waits for JavaScript) and asks the
//! client's thread, through one weak thread-safe function, to take them: one JavaScript call per
//! batch, however many measurements were queued since the last. `lib/telemetry.ts` records them on
//! the OpenTelemetry instruments of [`telemetry_instruments`] (core's table).
//!
//! The thread-safe function is weak (it never keeps the event loop alive), and `close()` takes
//! what is left with [`Queue::take`] after core's close, then stops the queue: measurements after
//! that are dropped. A client never closed queues until it is collected or the process ends; the
//! queue keeps nothing alive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use crosslock::telemetry::{Event, Instrument, Measurement, Recorder, Telemetry};
use napi::bindgen_prelude::Function;
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
struct Owned {
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

type Tick = ThreadsafeFunction<(), (), Vec<TelemetryMeasurement>, napi::Status, false, true>;

/// What the recorder and the client's thread share.
pub(crate) struct Queue {
    sender: mpsc::Sender<Owned>,
    /// Taken only on the client's thread (the tick and `close()`); the recorder never locks it.
    receiver: Mutex<mpsc::Receiver<Owned>>,
    /// Whether a tick is on its way: the recorder calls the thread-safe function only when not.
    scheduled: AtomicBool,
    /// Set by `close()`: nothing more is queued.
    stopped: AtomicBool,
    names: bool,
}

impl Queue {
    /// Everything queued so far, on the client's thread.
    pub(crate) fn take(&self) -> Vec<TelemetryMeasurement> {
        self.scheduled.store(false, Ordering::SeqCst);
        let receiver = self.receiver.lock().unwrap_or_else(|e| e.into_inner());
        receiver.try_iter().map(Owned::into_js).collect()
    }

    /// What is left, and nothing more after it (`close()`).
    pub(crate) fn stop(&self) -> Vec<TelemetryMeasurement> {
        self.stopped.store(true, Ordering::SeqCst);
        self.take()
    }
}

struct Queued {
    queue: Arc<Queue>,
    tick: Tick,
}

impl Recorder for Queued {
    fn record(&self, event: &Event<'_>) {
        let queue = &self.queue;
        if queue.stopped.load(Ordering::Relaxed) {
            return;
        }
        for m in event.measurements() {
            // The receiver lives as long as the queue: a send cannot fail.
            let _ = queue.sender.send(Owned {
                name: m.name.filter(|_| queue.names).map(str::to_owned),
                measurement: m.unnamed(),
            });
        }
        if !queue.scheduled.swap(true, Ordering::SeqCst) {
            // Non-blocking; a closing environment refuses the call, and there is no one to tell.
            let _ = self.tick.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// The telemetry of a client connected with metrics: its measurements go, in batches, to
/// `sink(batch)` on this thread. `names`: whether each carries the object's name.
pub(crate) fn telemetry(
    sink: Function<'_, Vec<TelemetryMeasurement>, ()>,
    names: bool,
) -> napi::Result<(Telemetry, Arc<Queue>)> {
    let (sender, receiver) = mpsc::channel();
    let queue = Arc::new(Queue {
        sender,
        receiver: Mutex::new(receiver),
        scheduled: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        names,
    });
    let taker = queue.clone();
    let tick: Tick = sink
        .build_threadsafe_function::<()>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(move |_ctx| Ok(taker.take()))?;
    let recorder = Queued {
        queue: queue.clone(),
        tick,
    };
    Ok((Telemetry::new(recorder), queue))
}
