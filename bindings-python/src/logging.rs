//! Core's `tracing` events (target `crosslock`) into Python's `logging`, logger `crosslock`.
//!
//! Events are raised on core's runtime threads, which must never wait for the GIL: an event that
//! passes the cached level is formatted there and handed to one dispatcher thread, which takes the
//! GIL and calls `logging.getLogger("crosslock").log(level, message)`. Python's logger applies its
//! own level and handlers as usual. The cached level (what is worth formatting at all) is the
//! logger's effective level, read when a client connects (`_refresh_log_level`) and after every
//! record the dispatcher delivers; warnings and errors always reach Python, which filters them.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, Once};

use pyo3::prelude::*;
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Python's numeric levels.
const DEBUG: u8 = 10;
const INFO: u8 = 20;
const WARNING: u8 = 30;
const ERROR: u8 = 40;

/// The lowest Python level worth formatting: the logger's effective level as last read.
static THRESHOLD: AtomicU8 = AtomicU8::new(WARNING);

/// A record on its way to Python: its level and message.
type Record = (u8, String);

/// The dispatcher thread of this process and the pid it was started in (re-created in a forked
/// child, whose threads are gone), with the sender of its records.
static DISPATCHER: Mutex<Option<Dispatcher>> = Mutex::new(None);

struct Dispatcher {
    pid: u32,
    records: Sender<Record>,
    thread: std::thread::JoinHandle<()>,
}

/// Takes this process's dispatcher (a forked child's copy of the parent's is forgotten: its
/// thread does not exist here).
fn take(slot: &mut Option<Dispatcher>) -> Option<Dispatcher> {
    match slot.take() {
        Some(dispatcher) if dispatcher.pid == std::process::id() => Some(dispatcher),
        Some(foreign) => {
            std::mem::forget(foreign);
            None
        }
        None => None,
    }
}

/// Ends the dispatcher thread once it has delivered what it was given; the next event starts a
/// new one. Returns the thread, for the caller to join (with the GIL released: it needs the GIL
/// to deliver the last records).
pub(crate) fn stop_dispatcher() -> Option<std::thread::JoinHandle<()>> {
    let dispatcher = take(&mut DISPATCHER.lock().unwrap_or_else(|e| e.into_inner()))?;
    drop(dispatcher.records);
    Some(dispatcher.thread)
}

fn python_level(level: &Level) -> u8 {
    match *level {
        Level::ERROR => ERROR,
        Level::WARN => WARNING,
        Level::INFO => INFO,
        _ => DEBUG,
    }
}

struct ToPython;

impl<S: Subscriber> Layer<S> for ToPython {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if metadata.target().starts_with("crosslock") {
            // Asked again at every event: the threshold follows the Python logger's level.
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        metadata.target().starts_with("crosslock")
            && python_level(metadata.level()) >= THRESHOLD.load(Ordering::Relaxed).min(WARNING)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let message = crosslock::ffi::event_text(event);
        send(python_level(event.metadata().level()), message);
    }
}

fn send(level: u8, message: String) {
    let mut dispatcher = DISPATCHER.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if !matches!(&*dispatcher, Some(current) if current.pid == pid) {
        drop(take(&mut dispatcher));
        let (tx, rx) = channel::<Record>();
        let spawned = std::thread::Builder::new()
            .name("crosslock-log".into())
            .spawn(move || {
                for (level, message) in rx {
                    // Not while the interpreter shuts down: the record is dropped then.
                    let _ = Python::try_attach(|py| deliver(py, level, &message));
                }
            });
        let Ok(thread) = spawned else {
            return;
        };
        *dispatcher = Some(Dispatcher {
            pid,
            records: tx,
            thread,
        });
    }
    if let Some(current) = &*dispatcher {
        let _ = current.records.send((level, message));
    }
}

fn deliver(py: Python<'_>, level: u8, message: &str) {
    let result = (|| -> PyResult<()> {
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("crosslock",))?;
        logger.call_method1("log", (level, message))?;
        refresh_from(&logger)
    })();
    if let Err(e) = result {
        e.write_unraisable(py, None);
    }
}

fn refresh_from(logger: &Bound<'_, PyAny>) -> PyResult<()> {
    let level: i64 = logger.call_method0("getEffectiveLevel")?.extract()?;
    THRESHOLD.store(level.clamp(0, i64::from(u8::MAX)) as u8, Ordering::Relaxed);
    Ok(())
}

/// Installs the bridge as the process's `tracing` subscriber (once; if the host process already
/// installed one, as an embedding Rust program might, that one stays).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ =
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(ToPython));
    });
}

/// Re-reads the `crosslock` logger's effective level (called when a client connects).
#[pyfunction]
pub(crate) fn _refresh_log_level(py: Python<'_>) -> PyResult<()> {
    install();
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("crosslock",))?;
    refresh_from(&logger)
}
