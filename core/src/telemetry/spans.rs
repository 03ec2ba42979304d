//! Spans, made by core and handed, ended, to the host's [`SpanExporter`]
//! ([`Telemetry::with_spans`]; in Rust, `OpenTelemetry::with_tracer` with the cargo feature
//! `opentelemetry`, which makes them OpenTelemetry spans); the spans are listed on
//! [`SpanExporter`].
//!
//! No argument values (holder ids, leases) are attributes; lock names are, when asked for.
//!
//! A span is exported once it has ended, with its children (the script calls made inside it):
//! one [`SpanData`] tree per acquire, release or round, with its start and end times, so a host
//! replays it into its tracing SDK. Which span the caller was in is the host's to say: the
//! [`SpanParent`] of the [`with_span_parent`] scope the operation runs in, or, outside one, what
//! [`SpanExporter::parent`] says as the span begins.
//!
//! Core calls the functions below at its few places; without spans each costs a branch.

use std::any::Any;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use super::instruments::attribute;
use super::{ObjectType, Telemetry, WaitOutcome};
use crate::error::Result;

/// Which operations get spans.
///
/// # Examples
///
/// ```
/// assert_ne!(crosslock::telemetry::SpanLevel::Acquires, crosslock::telemetry::SpanLevel::All);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpanLevel {
    /// Acquires (and latch waits), with the script calls each makes.
    Acquires,
    /// Acquires, releases and watchdog rounds, and every script call.
    All,
}

/// A span's kind, as OpenTelemetry names them.
///
/// # Examples
///
/// ```
/// assert_eq!(crosslock::telemetry::SpanKind::Client.as_str(), "client");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpanKind {
    /// An operation inside the process (acquire, release, watchdog round).
    Internal,
    /// A call to Redis (a script run).
    Client,
}

impl SpanKind {
    /// `internal` or `client`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::telemetry::SpanKind::Internal.as_str(), "internal");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            SpanKind::Internal => "internal",
            SpanKind::Client => "client",
        }
    }
}

/// An attribute's value.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::SpanValue;
/// assert_eq!(SpanValue::Int(2), SpanValue::Int(2));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SpanValue {
    /// Text.
    Str(String),
    /// A whole number.
    Int(i64),
    /// A number.
    Float(f64),
}

/// The span the caller was in, as its host knows it (an OpenTelemetry context, a handle to
/// one): opaque to core, handed back on the [`SpanData`] of the spans made under it.
///
/// # Examples
///
/// ```
/// let parent = crosslock::telemetry::SpanParent::new(42_u64);
/// assert_eq!(parent.downcast_ref::<u64>(), Some(&42));
/// ```
#[derive(Clone)]
pub struct SpanParent(Arc<dyn Any + Send + Sync>);

impl SpanParent {
    /// `value` as a parent.
    ///
    /// # Examples
    ///
    /// ```
    /// let parent = crosslock::telemetry::SpanParent::new(String::from("request 7"));
    /// # let _ = parent;
    /// ```
    pub fn new(value: impl Any + Send + Sync) -> Self {
        SpanParent(Arc::new(value))
    }

    /// The value, if it is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let parent = crosslock::telemetry::SpanParent::new(7_u32);
    /// assert_eq!(parent.downcast_ref::<u32>(), Some(&7));
    /// assert_eq!(parent.downcast_ref::<u64>(), None);
    /// ```
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for SpanParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpanParent")
    }
}

/// An ended span, with the spans made inside it.
///
/// # Examples
///
/// ```
/// use crosslock::telemetry::{SpanData, SpanExporter};
/// struct Print;
/// impl SpanExporter for Print {
///     fn export(&self, span: SpanData) {
///         println!("{} ({} children)", span.name, span.children.len());
///     }
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpanData {
    /// `crosslock.acquire`, `EVALSHA lock/acquire`, …
    pub name: String,
    /// Internal or client.
    pub kind: SpanKind,
    /// When it began.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Its attributes (see the module's table).
    pub attributes: Vec<(&'static str, SpanValue)>,
    /// Its error status's description, if it failed.
    pub error: Option<String>,
    /// The spans made inside it, in the order they ended.
    pub children: Vec<SpanData>,
    /// The caller's span, for a span no other of crosslock's contains (`None` for a root, a
    /// watchdog round's, and for the children).
    pub parent: Option<SpanParent>,
}

/// Where a client's ended spans go ([`Telemetry::with_spans`]). The spans:
///
/// | span | kind | attributes | when |
/// | --- | --- | --- | --- |
/// | `crosslock.acquire` | internal | `crosslock.object.type`, `crosslock.outcome`, `crosslock.attempts`, `crosslock.wait.seconds` | every acquire (and latch wait), a child of the caller's current span |
/// | `EVALSHA <script>` | client | `db.system.name` = `redis`, `db.operation.name` = `EVALSHA`, `crosslock.script`, `server.address`, `server.port` | every script call inside one of crosslock's spans ([`SpanLevel::All`]: every script call) |
/// | `crosslock.release` | internal | `crosslock.object.type` | a lock's release ([`SpanLevel::All`]) |
/// | `crosslock.renewal` | internal | `crosslock.renewal.renewed`, `.gone`, `.failed` | a watchdog round ([`SpanLevel::All`]) |
///
/// No argument values (holder ids, leases) are attributes; lock names are, when asked for.
///
/// `export` is called on the thread where the span ends (a caller's, or one of crosslock's
/// runtime threads): keep it short, never block, never call crosslock from it.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use crosslock::telemetry::{Event, SpanData, SpanExporter, SpanLevel, Telemetry};
///
/// #[derive(Default, Clone)]
/// struct Names(Arc<Mutex<Vec<String>>>);
///
/// impl SpanExporter for Names {
///     fn export(&self, span: SpanData) {
///         self.0.lock().unwrap().push(span.name);
///     }
/// }
///
/// let names = Names::default();
/// let telemetry = Telemetry::from_fn(|_: &Event<'_>| {})
///     .with_spans(names.clone(), SpanLevel::Acquires, false);
/// let options = crosslock::ClientOptions::new().telemetry(telemetry);
/// # let _ = options;
/// ```
pub trait SpanExporter: Send + Sync + 'static {
    /// The caller's span as a span begins outside a [`with_span_parent`] scope (called on the
    /// caller's thread, where its future is polled); `None` by default.
    fn parent(&self) -> Option<SpanParent> {
        None
    }

    /// Exports one ended span (with its children).
    fn export(&self, span: SpanData);
}

/// Runs `operation` with `parent` as the caller's span: the spans it makes carry it in
/// [`SpanData::parent`]. For hosts that know the caller's span where the call is made but not
/// where its future is polled.
///
/// # Cancel safety
///
/// As `operation`'s: dropping this drops it.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::telemetry::{SpanParent, with_span_parent};
/// let lock = client.lock("orders:42")?;
/// let held = with_span_parent(SpanParent::new("request 7"), lock.acquire()).await?;
/// # drop(held); Ok(()) }
/// ```
pub async fn with_span_parent<F: Future>(parent: SpanParent, operation: F) -> F::Output {
    PARENT.scope(parent, operation).await
}

tokio::task_local! {
    /// The caller's span, as [`with_span_parent`] gave it.
    static PARENT: SpanParent;
    /// The span of crosslock's the code being polled is inside, if any.
    static OPEN: Arc<Open>;
}

/// `f` in the span (and the caller's span) the code calling this is in, for a task it spawns:
/// task-locals stay with their task. (Not an `async fn`: they are read here, not where the
/// task first polls it.)
pub(crate) fn inherited<F: Future>(f: F) -> impl Future<Output = F::Output> {
    let parent = PARENT.try_with(SpanParent::clone).ok();
    let open = OPEN.try_with(Arc::clone).ok();
    async move {
        match (open, parent) {
            (Some(open), Some(parent)) => PARENT.scope(parent, OPEN.scope(open, f)).await,
            (Some(open), None) => OPEN.scope(open, f).await,
            (None, Some(parent)) => PARENT.scope(parent, f).await,
            (None, None) => f.await,
        }
    }
}

/// What a client's spans are made with.
pub(crate) struct Spans {
    pub(crate) exporter: Arc<dyn SpanExporter>,
    pub(crate) level: SpanLevel,
    pub(crate) names: bool,
}

impl std::fmt::Debug for Spans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spans").field("level", &self.level).finish()
    }
}

impl Spans {
    fn object(&self, object: ObjectType, name: &str) -> Vec<(&'static str, SpanValue)> {
        let mut attributes = vec![(
            attribute::OBJECT_TYPE,
            SpanValue::Str(object.as_str().to_owned()),
        )];
        if self.names {
            attributes.push((attribute::LOCK_NAME, SpanValue::Str(name.to_owned())));
        }
        attributes
    }

    /// A root span `span` of `object` named `name`, under the caller's span; `attempts`: it
    /// counts its acquisition scripts.
    fn object_root(
        &self,
        span: &'static str,
        object: ObjectType,
        name: &str,
        attempts: bool,
    ) -> Root<'_> {
        Root::begin(
            self,
            span,
            self.object(object, name),
            self.parent(),
            attempts,
        )
    }

    /// The caller's span, as a span begins here.
    fn parent(&self) -> Option<SpanParent> {
        PARENT
            .try_with(SpanParent::clone)
            .ok()
            .or_else(|| self.exporter.parent())
    }
}

/// One of crosslock's spans, open: the script calls made inside it become its children; in an
/// acquire's, its attempts (acquisition scripts) are counted.
struct Open {
    attempts: Option<AtomicU32>,
    children: Mutex<Vec<SpanData>>,
}

/// A span being timed.
struct Timed {
    start: SystemTime,
    began: Instant,
}

impl Timed {
    fn now() -> Self {
        Timed {
            start: SystemTime::now(),
            began: Instant::now(),
        }
    }

    /// The span's data, ended now.
    fn end(
        &self,
        name: String,
        kind: SpanKind,
        attributes: Vec<(&'static str, SpanValue)>,
    ) -> SpanData {
        SpanData {
            name,
            kind,
            start: self.start,
            end: self.start + self.began.elapsed(),
            attributes,
            error: None,
            children: Vec::new(),
            parent: None,
        }
    }
}

/// A root span (an acquire, a release, a round), open until [`Root::end`].
struct Root<'s> {
    spans: &'s Spans,
    name: &'static str,
    attributes: Vec<(&'static str, SpanValue)>,
    timed: Timed,
    parent: Option<SpanParent>,
    open: Arc<Open>,
}

impl<'s> Root<'s> {
    fn begin(
        spans: &'s Spans,
        name: &'static str,
        attributes: Vec<(&'static str, SpanValue)>,
        parent: Option<SpanParent>,
        counts_attempts: bool,
    ) -> Self {
        Root {
            spans,
            name,
            attributes,
            timed: Timed::now(),
            parent,
            open: Arc::new(Open {
                attempts: counts_attempts.then(|| AtomicU32::new(0)),
                children: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Polls `f` inside the span.
    async fn within<F: Future>(&self, f: F) -> F::Output {
        OPEN.scope(self.open.clone(), f).await
    }

    fn attempts(&self) -> u32 {
        self.open
            .attempts
            .as_ref()
            .map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// Ends the span with `more` attributes and `error`, and exports it.
    fn end(mut self, more: Vec<(&'static str, SpanValue)>, error: Option<String>) {
        self.attributes.extend(more);
        let mut data = self.timed.end(
            self.name.to_owned(),
            SpanKind::Internal,
            std::mem::take(&mut self.attributes),
        );
        data.error = error;
        data.parent = self.parent.take();
        data.children =
            std::mem::take(&mut *self.open.children.lock().unwrap_or_else(|p| p.into_inner()));
        self.spans.exporter.export(data);
    }
}

/// Ends an acquire's span when dropped: with the outcome set from its result, or as cancelled
/// (the caller dropped the acquire).
struct Acquiring<'s> {
    root: Option<Root<'s>>,
    outcome: WaitOutcome,
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        let Some(root) = self.root.take() else { return };
        let more = vec![
            (
                attribute::OUTCOME,
                SpanValue::Str(self.outcome.as_str().to_owned()),
            ),
            (
                "crosslock.attempts",
                SpanValue::Int(i64::from(root.attempts())),
            ),
            (
                "crosslock.wait.seconds",
                SpanValue::Float(root.timed.began.elapsed().as_secs_f64()),
            ),
        ];
        let error = matches!(self.outcome, WaitOutcome::Error | WaitOutcome::Unavailable)
            .then(|| self.outcome.as_str().to_owned());
        root.end(more, error);
    }
}

/// `wait`, an acquire of `object` named `name`, in a `crosslock.acquire` span when `telemetry`
/// makes spans.
pub(crate) async fn acquire<T>(
    telemetry: &Telemetry,
    object: ObjectType,
    name: &str,
    wait: impl Future<Output = Result<Option<T>>>,
) -> Result<Option<T>> {
    let Some(spans) = telemetry.spans.as_deref() else {
        return wait.await;
    };
    let root = spans.object_root("crosslock.acquire", object, name, true);
    let open = root.open.clone();
    let mut acquiring = Acquiring {
        root: Some(root),
        outcome: WaitOutcome::Cancelled,
    };
    let result = OPEN.scope(open, wait).await;
    acquiring.outcome = WaitOutcome::of(&result);
    result
}

/// `release`, a release of `object` named `name`, in a `crosslock.release` span at
/// [`SpanLevel::All`].
pub(crate) async fn release<T>(
    telemetry: Option<&Telemetry>,
    object: ObjectType,
    name: &str,
    release: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(spans) = telemetry
        .and_then(|t| t.spans.as_deref())
        .filter(|s| s.level == SpanLevel::All)
    else {
        return release.await;
    };
    let root = spans.object_root("crosslock.release", object, name, false);
    let result = root.within(release).await;
    let error = result.as_ref().err().map(ToString::to_string);
    root.end(Vec::new(), error);
    result
}

/// `call`, a run of the script `script` on the node at `address` (`host:port`), in a client
/// span when inside one of crosslock's spans (every call, at [`SpanLevel::All`]).
/// `acquisition`: the script takes something (an acquire's attempt).
pub(crate) async fn script<T>(
    telemetry: Option<&Telemetry>,
    script: &'static str,
    address: impl FnOnce() -> String,
    acquisition: bool,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(spans) = telemetry.and_then(|t| t.spans.as_deref()) else {
        return call.await;
    };
    let open = OPEN.try_with(Arc::clone).ok();
    if open.is_none() && spans.level != SpanLevel::All {
        return call.await;
    }
    if acquisition && let Some(attempts) = open.as_ref().and_then(|o| o.attempts.as_ref()) {
        attempts.fetch_add(1, Ordering::Relaxed);
    }
    let parent = if open.is_none() { spans.parent() } else { None };
    let timed = Timed::now();
    let result = call.await;
    let address = address();
    let (host, port) = match address.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse::<i64>().ok()),
        None => (address.clone(), None),
    };
    let mut attributes = vec![
        ("db.system.name", SpanValue::Str("redis".into())),
        ("db.operation.name", SpanValue::Str("EVALSHA".into())),
        ("crosslock.script", SpanValue::Str(script.into())),
        ("server.address", SpanValue::Str(host)),
    ];
    if let Some(port) = port {
        attributes.push(("server.port", SpanValue::Int(port)));
    }
    if let Err(e) = &result {
        attributes.push(("error.type", SpanValue::Str(e.kind().code().into())));
    }
    let mut data = timed.end(format!("EVALSHA {script}"), SpanKind::Client, attributes);
    data.error = result.as_ref().err().map(ToString::to_string);
    match open {
        Some(open) => open
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(data),
        None => {
            data.parent = parent;
            spans.exporter.export(data);
        }
    }
    result
}

/// A watchdog round's `crosslock.renewal` span (a root: no caller's), at [`SpanLevel::All`].
pub(crate) struct Round<'s>(Root<'s>);

impl<'s> Round<'s> {
    /// The round's span, if `telemetry` makes one.
    pub(crate) fn begin(telemetry: Option<&'s Telemetry>) -> Option<Round<'s>> {
        let spans = telemetry
            .and_then(|t| t.spans.as_deref())
            .filter(|s| s.level == SpanLevel::All)?;
        Some(Round(Root::begin(
            spans,
            "crosslock.renewal",
            Vec::new(),
            None,
            false,
        )))
    }

    /// `f` (a part of the round) inside the round's span, if any.
    pub(crate) async fn within<F: Future>(round: &Option<Round<'_>>, f: F) -> F::Output {
        match round {
            Some(round) => round.0.within(f).await,
            None => f.await,
        }
    }

    /// Ends the span with what the round renewed, found gone and failed to renew.
    pub(crate) fn end(self, [renewed, gone, failed]: [u32; 3]) {
        let more = vec![
            (
                "crosslock.renewal.renewed",
                SpanValue::Int(i64::from(renewed)),
            ),
            ("crosslock.renewal.gone", SpanValue::Int(i64::from(gone))),
            (
                "crosslock.renewal.failed",
                SpanValue::Int(i64::from(failed)),
            ),
        ];
        self.0.end(more, None);
    }
}
