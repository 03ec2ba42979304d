//! `connect()` and the native `Client`: core's [`crosslock::Client`] as seen from JavaScript.

use napi::bindgen_prelude::{Function, Object};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::error;
use crate::lock::JsLock;
use crate::runtime;

/// Client settings in milliseconds; absent fields keep core's defaults.
#[napi(object)]
pub struct ConnectOptions {
    /// How long connecting may take (default 5000).
    pub connect_timeout: Option<f64>,
    /// How long one command may take (default 3000).
    pub response_timeout: Option<f64>,
    /// The lease of a lock taken without one, renewed every third of it (default 30000).
    pub watchdog_timeout: Option<f64>,
    /// How many locks one renewal script renews (default 100).
    pub watchdog_batch_size: Option<u32>,
    /// PEM root certificate(s) to trust for a `rediss://` server with a private CA.
    pub tls_ca_cert: Option<napi::bindgen_prelude::Buffer>,
}

/// A lock of this client that a renewal found gone.
#[napi(object)]
pub struct LostLockEvent {
    /// The lock's name.
    pub name: String,
    /// The owner number that held it.
    pub owner: f64,
}

fn options(options: Option<ConnectOptions>) -> crosslock::Result<crosslock::ClientOptions> {
    use crosslock::lock::duration_from_millis;
    let mut out = crosslock::ClientOptions::new();
    let Some(o) = options else { return Ok(out) };
    if let Some(ms) = o.connect_timeout {
        out = out.connect_timeout(duration_from_millis(ms, "connectTimeout")?);
    }
    if let Some(ms) = o.response_timeout {
        out = out.response_timeout(duration_from_millis(ms, "responseTimeout")?);
    }
    if let Some(ms) = o.watchdog_timeout {
        out = out.watchdog_timeout(duration_from_millis(ms, "watchdogTimeout")?);
    }
    if let Some(n) = o.watchdog_batch_size {
        out = out.watchdog_batch_size(n as usize);
    }
    if let Some(pem) = o.tls_ca_cert {
        out = out.tls_ca_cert(pem.to_vec());
    }
    Ok(out)
}

/// Connects to `url`; `onLockLost` is called (on this thread, never keeping it alive) for every
/// lock of the client that a renewal finds gone.
#[napi(ts_return_type = "Promise<Client>")]
pub fn connect<'env>(
    env: &'env Env,
    url: String,
    options: Option<ConnectOptions>,
    on_lock_lost: Function<'env, LostLockEvent, ()>,
) -> Result<Object<'env>> {
    let lost = on_lock_lost
        .build_threadsafe_function::<LostLockEvent>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    let options = self::options(options);
    runtime::promise_with(
        env,
        async move {
            let client = crosslock::Client::connect_with(&url, options?).await?;
            client.on_lock_lost(move |event| {
                let event = LostLockEvent {
                    name: event.name,
                    owner: event.owner.get() as f64,
                };
                lost.call(event, ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(client)
        },
        |env, client| {
            let key = runtime::register(&env, client.clone())?;
            Ok(JsClient { inner: client, key })
        },
    )
}

/// A connected client (see core's `Client`). Made by `connect()`.
#[napi(js_name = "Client")]
pub struct JsClient {
    inner: crosslock::Client,
    /// Its entry in the environment's registry of clients to close at exit.
    key: u64,
}

#[napi]
impl JsClient {
    /// The client id: the `<client-uuid>` of its holder strings.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id()
    }

    /// The `host:port` it connects to.
    #[napi(getter)]
    pub fn address(&self) -> String {
        self.inner.address().to_owned()
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The lock named `name`.
    #[napi]
    pub fn lock(&self, name: String) -> Result<JsLock> {
        self.inner
            .lock(&name)
            .map(JsLock::new)
            .map_err(|e| error::to_napi(&e))
    }

    /// Closes the client: pending acquires fail, held locks are released, renewal stops.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        runtime::forget(env, self.key);
        let client = self.inner.clone();
        runtime::promise(env, async move {
            client.close().await;
            Ok(())
        })
    }

    /// How many channels the subscription connection listens to now (diagnostics, tests).
    #[napi]
    pub fn subscribed_channels(&self) -> u32 {
        self.inner.subscribed_channels() as u32
    }

    /// How many locks the watchdog renews now (diagnostics, tests).
    #[napi]
    pub fn watched_locks(&self) -> u32 {
        self.inner.watched_locks() as u32
    }
}
