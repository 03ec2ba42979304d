//! [`OpenTelemetry`]: a [`Recorder`] that records a client's events as OpenTelemetry metrics
//! (the cargo feature `opentelemetry`).

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

use super::instruments::{Instrument, InstrumentKind, attribute};
use super::{
    Event, Recorder, SpanData, SpanExporter, SpanKind, SpanLevel, SpanParent, SpanValue, Telemetry,
};
use std::sync::Arc;

use opentelemetry::Context;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{self, SpanBuilder, Status, TraceContextExt, Tracer};

/// One instrument as made on the meter.
#[derive(Debug, Clone)]
enum Made {
    Histogram(Histogram<f64>),
    Counter(Counter<u64>),
    UpDown(UpDownCounter<i64>),
}

/// Records a client's events as OpenTelemetry metrics on a [`Meter`], on the instruments of
/// [`Instrument::ALL`] (its rustdoc has the table: names, kinds, units, attributes).
///
/// Lock names are not attributes (one series per lock name would be unbounded); turn them on
/// with [`with_lock_names`](Self::with_lock_names) where names are few.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> crosslock::Result<()> {
/// use crosslock::{Client, ClientOptions, telemetry::OpenTelemetry};
/// let meter = opentelemetry::global::meter("orders-service");
/// let options = ClientOptions::new().telemetry(OpenTelemetry::new(&meter).into());
/// let client = Client::connect_with("redis://127.0.0.1:6379/0", options).await?;
/// # client.close().await; Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenTelemetry {
    /// By [`Instrument::index`].
    made: Vec<Made>,
    names: bool,
    /// What spans are made with ([`with_tracer`](Self::with_tracer)), and which.
    tracer: Option<(Arc<BoxedTracer>, SpanLevel)>,
}

impl std::fmt::Debug for OpenTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenTelemetry")
            .field("names", &self.names)
            .field("spans", &self.tracer.as_ref().map(|(_, level)| level))
            .finish_non_exhaustive()
    }
}

impl OpenTelemetry {
    /// The instruments, made on `meter`.
    ///
    /// # Examples
    ///
    /// ```
    /// let meter = opentelemetry::global::meter("orders-service");
    /// let recorder = crosslock::telemetry::OpenTelemetry::new(&meter);
    /// # let _ = recorder;
    /// ```
    pub fn new(meter: &Meter) -> Self {
        let made = Instrument::ALL
            .iter()
            .map(|i| match i.kind() {
                InstrumentKind::Histogram => Made::Histogram(
                    meter
                        .f64_histogram(i.name())
                        .with_unit(i.unit())
                        .with_description(i.description())
                        .with_boundaries(i.bounds().to_vec())
                        .build(),
                ),
                InstrumentKind::Counter => Made::Counter(
                    meter
                        .u64_counter(i.name())
                        .with_unit(i.unit())
                        .with_description(i.description())
                        .build(),
                ),
                InstrumentKind::UpDownCounter => Made::UpDown(
                    meter
                        .i64_up_down_counter(i.name())
                        .with_unit(i.unit())
                        .with_description(i.description())
                        .build(),
                ),
            })
            .collect();
        OpenTelemetry {
            made,
            names: false,
            tracer: None,
        }
    }

    /// Adds the attribute `crosslock.lock.name` (the object's name) to every measurement of a
    /// lock-scoped instrument: one series per name, so only where names are few.
    ///
    /// # Examples
    ///
    /// ```
    /// let meter = opentelemetry::global::meter("orders-service");
    /// let recorder = crosslock::telemetry::OpenTelemetry::new(&meter).with_lock_names(true);
    /// # let _ = recorder;
    /// ```
    pub fn with_lock_names(mut self, names: bool) -> Self {
        self.names = names;
        self
    }

    /// Makes spans with `tracer` too, for the operations `level` names: a `crosslock.acquire`
    /// span per acquire (a child of the caller's current span, with its outcome and attempts)
    /// and a client span per script call it makes (`db.system.name` = `redis`,
    /// `db.operation.name` = `EVALSHA`, `server.address`, `server.port`; no argument values);
    /// with [`SpanLevel::All`], releases, watchdog rounds and every other script call as well.
    /// The caller's span is OpenTelemetry's current context where the acquire's future is
    /// polled (see `opentelemetry::context::FutureExt::with_context`).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{OpenTelemetry, SpanLevel};
    /// let meter = opentelemetry::global::meter("orders-service");
    /// let tracer = opentelemetry::global::tracer("orders-service");
    /// let recorder = OpenTelemetry::new(&meter).with_tracer(tracer, SpanLevel::Acquires);
    /// # let _ = recorder;
    /// ```
    pub fn with_tracer<T>(mut self, tracer: T, level: SpanLevel) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        self.tracer = Some((Arc::new(BoxedTracer::new(Box::new(tracer))), level));
        self
    }
}

impl Recorder for OpenTelemetry {
    fn record(&self, event: &Event<'_>) {
        for m in event.measurements() {
            let mut attributes: Vec<KeyValue> = m
                .attributes()
                .iter()
                .map(|&(k, v)| KeyValue::new(k, v))
                .collect();
            if let (true, Some(name)) = (self.names, m.name) {
                attributes.push(KeyValue::new(attribute::LOCK_NAME, name.to_owned()));
            }
            match &self.made[m.instrument.index()] {
                Made::Histogram(h) => h.record(m.value, &attributes),
                Made::Counter(c) => c.add(m.value as u64, &attributes),
                Made::UpDown(u) => u.add(m.value as i64, &attributes),
            }
        }
    }
}

impl From<OpenTelemetry> for Telemetry {
    /// The recorder as [`ClientOptions::telemetry`](crate::ClientOptions::telemetry) takes it.
    fn from(recorder: OpenTelemetry) -> Self {
        let names = recorder.names;
        let tracer = recorder.tracer.clone();
        let telemetry = Telemetry::new(recorder);
        match tracer {
            Some((tracer, level)) => telemetry.with_spans(Replay { tracer }, level, names),
            None => telemetry,
        }
    }
}

/// Core's ended spans replayed on an OpenTelemetry tracer, with their times: the caller's span
/// is OpenTelemetry's current context where a span began.
struct Replay {
    tracer: Arc<BoxedTracer>,
}

impl Replay {
    fn replay(&self, span: SpanData, parent: &Context) {
        let attributes: Vec<KeyValue> = span
            .attributes
            .into_iter()
            .map(|(key, value)| match value {
                SpanValue::Str(s) => KeyValue::new(key, s),
                SpanValue::Int(i) => KeyValue::new(key, i),
                SpanValue::Float(f) => KeyValue::new(key, f),
            })
            .collect();
        let kind = match span.kind {
            SpanKind::Client => trace::SpanKind::Client,
            _ => trace::SpanKind::Internal,
        };
        let builder = SpanBuilder::from_name(span.name)
            .with_kind(kind)
            .with_start_time(span.start)
            .with_attributes(attributes);
        let made = self.tracer.build_with_context(builder, parent);
        let cx = parent.with_span(made);
        if let Some(error) = span.error {
            cx.span().set_status(Status::error(error));
        }
        for child in span.children {
            self.replay(child, &cx);
        }
        cx.span().end_with_timestamp(span.end);
    }
}

impl SpanExporter for Replay {
    fn parent(&self) -> Option<SpanParent> {
        Some(SpanParent::new(Context::current()))
    }

    fn export(&self, mut span: SpanData) {
        let parent = span
            .parent
            .take()
            .and_then(|p| p.downcast_ref::<Context>().cloned())
            .unwrap_or_default();
        self.replay(span, &parent);
    }
}
