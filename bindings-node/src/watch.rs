//! `client.watch` for Node: core's [`crosslock::Watch`] behind one lock; its events as plain
//! objects (times in epoch ms). The async iterator lives in `lib/watch.ts`.

use std::sync::Arc;

use crosslock::CancellationToken;
use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;
use tokio::sync::Mutex;

use crate::inspect::Inspection;
use crate::runtime;

/// One change seen by a watch.
#[napi(object)]
pub struct WatchEvent {
    /// Epoch ms when the change was seen.
    pub at: f64,
    /// `acquired`, `reentered`, `exited`, `released`, `force-unlocked`, `expired`, `removed`,
    /// `queued`, `dequeued`, `count`, `mode` or `other`.
    pub event: String,
    /// The object's name.
    pub name: String,
    /// The holder or permit id concerned, if any.
    pub holder: Option<String>,
    /// The details in words.
    pub detail: String,
    /// The line `crosslock watch` prints.
    pub text: String,
    /// The object after the change.
    pub state: Inspection,
}

impl From<crosslock::WatchEvent> for WatchEvent {
    fn from(e: crosslock::WatchEvent) -> Self {
        WatchEvent {
            at: e.at_ms() as f64,
            event: e.kind.as_str().to_owned(),
            name: e.state.name.clone(),
            holder: e.holder.clone(),
            detail: e.detail.clone(),
            text: e.to_string(),
            state: e.state.into(),
        }
    }
}

/// A live view of one object (core's `Client::watch`).
#[napi(js_name = "Watch")]
pub struct JsWatch {
    inner: Arc<Mutex<Option<crosslock::Watch>>>,
    closed: CancellationToken,
    initial: crosslock::Inspection,
}

impl JsWatch {
    pub(crate) fn new(watch: crosslock::Watch) -> Self {
        JsWatch {
            initial: watch.current().clone(),
            inner: Arc::new(Mutex::new(Some(watch))),
            closed: CancellationToken::new(),
        }
    }
}

#[napi]
impl JsWatch {
    /// The object as it was when the watch started.
    #[napi(getter)]
    pub fn initial(&self) -> Inspection {
        self.initial.clone().into()
    }

    /// The next change; `null` once the watch is closed (a pending call included).
    #[napi(ts_return_type = "Promise<WatchEvent | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let (inner, closed) = (self.inner.clone(), self.closed.clone());
        runtime::promise(env, async move {
            tokio::select! {
                _ = closed.cancelled() => Ok(None),
                event = async {
                    let mut guard = inner.lock().await;
                    match guard.as_mut() {
                        Some(watch) => watch.next().await.map(|e| Some(WatchEvent::from(e))),
                        None => Ok(None),
                    }
                } => event,
            }
        })
    }

    /// Closes the subscription connection; a pending `next` answers `null`.
    #[napi]
    pub fn close(&self) {
        self.closed.cancel();
        let inner = self.inner.clone();
        crosslock::runtime::spawn(async move {
            inner.lock().await.take();
        });
    }
}
