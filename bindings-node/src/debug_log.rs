//! `NODE_DEBUG=crosslock`: core's `tracing` events (target `crosslock`) on stderr, in the format
//! of Node's `util.debuglog` (`CROSSLOCK <pid>: <message>`). Written from core's runtime threads
//! directly, so a busy JavaScript thread never delays nor loses them. Off unless enabled.

use std::io::Write;
use std::sync::Once;

use napi_derive::napi;
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

struct ToStderr;

impl<S: Subscriber> Layer<S> for ToStderr {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        metadata.target().starts_with("crosslock")
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let message = crosslock::ffi::event_text(event);
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        let line = format!("CROSSLOCK {}: {level}: {message}\n", std::process::id());
        // One write per line, so lines from several threads do not interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// Turns the debug log on for this process (the TypeScript layer calls it when
/// `util.debuglog('crosslock').enabled`, i.e. `NODE_DEBUG` names `crosslock`). Idempotent; if the
/// process already has a `tracing` subscriber, that one stays.
#[napi]
pub fn enable_debug_log() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ =
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(ToStderr));
    });
}
