//! `connect()` and the native `Client`: core's [`crosslock::Client`] as seen from JavaScript.

use napi::bindgen_prelude::{Function, Object};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::error;
use crate::runtime;

/// Client settings in milliseconds; absent fields keep core's defaults (`clientDefaults()`).
#[napi(object)]
pub struct ConnectOptions {
    /// How long connecting may take.
    pub connect_timeout: Option<f64>,
    /// How long one command may take.
    pub response_timeout: Option<f64>,
    /// The lease of a lock taken without one, renewed every third of it.
    pub watchdog_timeout: Option<f64>,
    /// How many locks one renewal script renews.
    pub watchdog_batch_size: Option<u32>,
    /// How long a fair-lock waiter that gave no wait limit may take to come back before the others
    /// skip it as dead (Redisson's `fairLockWaitTimeout`).
    pub fair_lock_wait_timeout: Option<f64>,
    /// PEM root certificate(s) to trust for a `rediss://` server with a private CA.
    pub tls_ca_cert: Option<napi::bindgen_prelude::Uint8Array>,
    /// After every acquisition, wait until this many replicas have it (Redis `WAIT`).
    pub wait_for_replicas: Option<u32>,
    /// How long to wait for those replicas.
    pub replica_wait_timeout: Option<f64>,
    /// What this process's connections are called in `CLIENT LIST` (`<clientName>-js-<pid>-<id8>`;
    /// default `crosslock`).
    pub client_name: Option<String>,
    /// Which calls may take a lane: `'all'`, `'sync'` or `'none'`.
    #[napi(ts_type = "'all' | 'sync' | 'none'")]
    pub lanes: Option<String>,
}

/// Core's defaults of `ConnectOptions`, in milliseconds: what an absent field means.
#[napi(object)]
pub struct ClientDefaults {
    pub connect_timeout: f64,
    pub response_timeout: f64,
    pub watchdog_timeout: f64,
    pub watchdog_batch_size: u32,
    pub fair_lock_wait_timeout: f64,
    pub replica_wait_timeout: f64,
    #[napi(ts_type = "'all' | 'sync' | 'none'")]
    pub lanes: String,
}

/// Core's defaults of the connect options (`crosslock::ClientOptions::default()`), so the
/// TypeScript layer (the CLI, the tests that tie the documented defaults) spells none of its own.
#[napi]
pub fn client_defaults() -> ClientDefaults {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let d = crosslock::ClientOptions::default();
    ClientDefaults {
        connect_timeout: ms(d.connect_timeout),
        response_timeout: ms(d.response_timeout),
        watchdog_timeout: ms(d.watchdog_timeout),
        // Within limits::WATCHDOG_BATCH, which fits a u32.
        watchdog_batch_size: d.watchdog_batch_size as u32,
        fair_lock_wait_timeout: ms(d.fair_lock_wait_timeout),
        replica_wait_timeout: ms(crosslock::ReplicaSync::DEFAULT_TIMEOUT),
        lanes: d.lanes.name().to_owned(),
    }
}

/// A lock of this client that a renewal found gone.
#[napi(object)]
pub struct LostLockEvent {
    /// The lock's name.
    pub name: String,
    /// The owner number that held it (0 for a permit, which has none: found by its id).
    pub owner: f64,
    /// The kind of lock (`LockKind.Lock`, `LockKind.WriteLock`, …, `LockKind.Permit`).
    pub kind: crate::lock::LockKind,
    /// The holder string (a permit's id for `LockKind.Permit`).
    pub holder: String,
}

/// A spin lock's back-off: `kind` `'exponential'` (`initial`, `max`) or `'constant'` (`initial`),
/// in milliseconds.
#[napi(object)]
pub struct BackoffOptions {
    /// `'exponential'` or `'constant'`.
    pub kind: String,
    /// The first (or every) pause, ms.
    pub initial: f64,
    /// The longest pause, ms (exponential only).
    pub max: Option<f64>,
}

fn options(options: Option<ConnectOptions>) -> crosslock::Result<crosslock::ClientOptions> {
    let duration_from_millis = |ms: f64, what: &str| crosslock::ffi::duration(ms, 0.001, what);
    crosslock::ffi::set_language("js");
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
    if let Some(ms) = o.fair_lock_wait_timeout {
        out = out.fair_lock_wait_timeout(duration_from_millis(ms, "fairLockWaitTimeout")?);
    }
    if let Some(n) = o.watchdog_batch_size {
        out = out.watchdog_batch_size(n as usize);
    }
    if let Some(pem) = o.tls_ca_cert {
        out = out.tls_ca_cert(pem.to_vec());
    }
    if let Some(replicas) = o.wait_for_replicas {
        let wait = match o.replica_wait_timeout {
            Some(ms) => duration_from_millis(ms, "replicaWaitTimeout")?,
            None => crosslock::ReplicaSync::DEFAULT_TIMEOUT,
        };
        out = out.wait_for_replicas(replicas, wait);
    }
    if let Some(name) = o.client_name {
        out = out.client_name(name);
    }
    if let Some(lanes) = o.lanes {
        out = out.lanes(crosslock::Lanes::from_name(&lanes)?);
    }
    Ok(out)
}

/// `connect`'s spans: ended spans to `onSpans`, in batches on this thread; `capture(forgotten)`
/// numbers the active context where a call is made; `all`: the level `all`; `names`: spans name
/// their object.
#[napi(object)]
pub struct SpanOptions<'env> {
    #[napi(ts_type = "(batch: TelemetrySpan[]) => void")]
    pub on_spans: Function<'env, Vec<crate::telemetry::TelemetrySpan>, ()>,
    #[napi(ts_type = "(forgotten: number[]) => number")]
    pub capture: Function<'env, Vec<u32>, u32>,
    pub all: bool,
    pub names: bool,
}

/// Connects to `url`; `onLockLost` is called (on this thread, never keeping it alive) for every
/// lock of the client that a renewal finds gone. With `onMeasurements`, core's telemetry is on:
/// its measurements come to it in batches, on this thread, never keeping it alive (see
/// `telemetry.rs`); `measurementNames`: whether they carry the object's name.
#[napi(ts_return_type = "Promise<Client>")]
pub fn connect<'env>(
    env: &'env Env,
    url: String,
    options: Option<ConnectOptions>,
    on_lock_lost: Function<'env, LostLockEvent, ()>,
    on_measurements: Option<Function<'env, Vec<crate::telemetry::TelemetryMeasurement>, ()>>,
    measurement_names: Option<bool>,
    spans: Option<SpanOptions<'env>>,
) -> Result<Object<'env>> {
    let lost = on_lock_lost
        .build_threadsafe_function::<LostLockEvent>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    let mut options = self::options(options);
    let (mut queue, mut span_queue) = (None, None);
    if on_measurements.is_some() || spans.is_some() {
        let spans = spans.map(|s| crate::telemetry::SpanSink {
            sink: s.on_spans,
            capture: s.capture,
            level: if s.all {
                crosslock::telemetry::SpanLevel::All
            } else {
                crosslock::telemetry::SpanLevel::Acquires
            },
            names: s.names,
        });
        let (telemetry, q, s) = crate::telemetry::telemetry(
            on_measurements,
            measurement_names.unwrap_or(false),
            spans,
        )?;
        options = options.map(|o| o.telemetry(telemetry));
        queue = Some(q);
        span_queue = s;
    }
    runtime::promise_with(
        env,
        async move {
            let client = crosslock::Client::connect_with(&url, options?).await?;
            client.on_lock_lost(move |event| {
                let event = LostLockEvent {
                    name: event.name,
                    owner: event.owner.map_or(0.0, |o| o.get() as f64),
                    kind: event.kind.into(),
                    holder: event.holder,
                };
                lost.call(event, ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(client)
        },
        |env, client| {
            let registration = runtime::register(&env, client.clone())?;
            Ok(JsClient {
                inner: client,
                registration,
                telemetry: queue,
                spans: span_queue,
            })
        },
    )
}

pub(crate) fn backoff_of(name: &str, b: &BackoffOptions) -> crosslock::Result<crosslock::Backoff> {
    let ms = |v: f64, w: &str| {
        crosslock::ffi::duration(
            v,
            0.001,
            &format!("the {w} back-off pause of spin lock '{name}'"),
        )
    };
    match (b.kind.as_str(), b.max) {
        ("constant", _) => Ok(crosslock::Backoff::constant(ms(b.initial, "constant")?)),
        ("exponential", Some(max)) => Ok(crosslock::Backoff::exponential(
            ms(b.initial, "initial")?,
            ms(max, "maximum")?,
        )),
        _ => Err(crosslock::ffi::invalid(format!(
            "spin lock '{name}': a back-off is {{ kind: 'constant', initial }} or {{ kind: 'exponential', initial, max }}, got kind '{}'",
            b.kind
        ))),
    }
}

/// A connected client (see core's `Client`). Made by `connect()`.
#[napi(js_name = "Client")]
pub struct JsClient {
    inner: crosslock::Client,
    /// Its entry in the environment's registry of clients to close at exit. Collected without
    /// `close()`, the client is dropped like core's: its connections close and renewal stops
    /// (its locks expire after the watchdog timeout).
    registration: runtime::Registration,
    /// The measurements queued for `onMeasurements` (`connect` with metrics or spans).
    telemetry: Option<std::sync::Arc<crate::telemetry::Measurements>>,
    /// The spans queued for `onSpans` (`connect` with spans).
    spans: Option<std::sync::Arc<crate::telemetry::Spans>>,
}

impl JsClient {
    /// Core's client.
    pub(crate) fn core(&self) -> &crosslock::Client {
        &self.inner
    }
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

    /// The `Semaphore` (Redisson `RSemaphore`) named `name`.
    #[napi]
    pub fn semaphore(&self, name: String) -> Result<crate::semaphore::JsSemaphore> {
        self.inner
            .semaphore(&name)
            .map(crate::semaphore::JsSemaphore::new)
            .map_err(|e| error::to_napi(&e))
    }

    /// The `PermitExpirableSemaphore` (Redisson `RPermitExpirableSemaphore`) named `name`.
    #[napi]
    pub fn permit_expirable_semaphore(
        &self,
        name: String,
    ) -> Result<crate::permit_expirable_semaphore::JsPermitExpirableSemaphore> {
        self.inner
            .permit_expirable_semaphore(&name)
            .map(crate::permit_expirable_semaphore::JsPermitExpirableSemaphore::new)
            .map_err(|e| error::to_napi(&e))
    }

    /// The `CountDownLatch` (Redisson `RCountDownLatch`) named `name`.
    #[napi]
    pub fn count_down_latch(
        &self,
        name: String,
    ) -> Result<crate::count_down_latch::JsCountDownLatch> {
        self.inner
            .count_down_latch(&name)
            .map(crate::count_down_latch::JsCountDownLatch::new)
            .map_err(|e| error::to_napi(&e))
    }

    /// Closes the client: pending acquires fail, held locks are released, renewal stops.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.registration.forget();
        let client = self.inner.clone();
        runtime::promise(env, async move {
            client.close().await;
            Ok(())
        })
    }

    /// The measurements queued and not yet handed to `onMeasurements`; with `stop`, the last
    /// ones: nothing is queued after them (`close()` calls it once core's close is done).
    #[napi]
    pub fn take_measurements(&self, stop: bool) -> Vec<crate::telemetry::TelemetryMeasurement> {
        match &self.telemetry {
            Some(q) => q.take_js(stop),
            None => Vec::new(),
        }
    }

    /// The spans queued and not yet handed to `onSpans`; with `stop`, the last ones (`close()`).
    #[napi]
    pub fn take_spans(&self, stop: bool) -> Vec<crate::telemetry::TelemetrySpan> {
        match &self.spans {
            Some(q) => q.take_js(stop),
            None => Vec::new(),
        }
    }

    /// What lives at `name`, as Redis has it (see core's `Client::inspect`).
    #[napi(ts_return_type = "Promise<Inspection>")]
    pub fn inspect<'env>(&self, env: &'env Env, name: String) -> Result<Object<'env>> {
        let client = self.inner.clone();
        runtime::promise(env, async move {
            client
                .inspect(&name)
                .await
                .map(crate::inspect::Inspection::from)
        })
    }

    /// `inspect` with core's text forms, judging liveness against `watchdog_ms`.
    #[napi(ts_return_type = "Promise<Described>")]
    pub fn describe<'env>(
        &self,
        env: &'env Env,
        name: String,
        watchdog_ms: f64,
    ) -> Result<Object<'env>> {
        let watchdog = crosslock::ffi::duration(watchdog_ms, 0.001, "watchdogTimeout")
            .map_err(|e| error::to_napi(&e))?;
        let client = self.inner.clone();
        runtime::promise(env, async move {
            let seen = client.inspect(&name).await?;
            Ok(crate::inspect::Described {
                text: seen.describe(watchdog),
                line: seen.summary(),
                inspection: seen.into(),
            })
        })
    }

    /// Deletes the lock at `name` whatever its kind; `true` if one was deleted.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn force_unlock_any<'env>(&self, env: &'env Env, name: String) -> Result<Object<'env>> {
        let client = self.inner.clone();
        runtime::promise(env, async move { client.force_unlock_any(&name).await })
    }

    /// Starts following the object at `name` live, a snapshot at least every `interval_ms`.
    #[napi(ts_return_type = "Promise<Watch>")]
    pub fn watch<'env>(
        &self,
        env: &'env Env,
        name: String,
        interval_ms: f64,
    ) -> Result<Object<'env>> {
        let interval = crosslock::ffi::duration(interval_ms, 0.001, "interval")
            .map_err(|e| error::to_napi(&e))?;
        let client = self.inner.clone();
        runtime::promise(env, async move {
            client
                .watch(&name, interval)
                .await
                .map(crate::watch::JsWatch::new)
        })
    }

    /// The names of objects matching `pattern` (SCAN), sorted, at most `limit`.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn scan<'env>(&self, env: &'env Env, pattern: String, limit: u32) -> Result<Object<'env>> {
        let client = self.inner.clone();
        runtime::promise(
            env,
            async move { client.scan(&pattern, limit as usize).await },
        )
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
