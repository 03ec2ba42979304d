//! Spans (the cargo feature `opentelemetry`, turned on by
//! `OpenTelemetry::with_tracer`):
//!
//! | span | kind | attributes | when |
//! | --- | --- | --- | --- |
//! | `crosslock.acquire` | internal | `crosslock.object.type`, `crosslock.outcome`, `crosslock.attempts`, `crosslock.wait.seconds` | every acquire (and latch wait), a child of the caller's current span |
//! | `EVALSHA <script>` | client | `db.system.name` = `redis`, `db.operation.name` = `EVALSHA`, `crosslock.script`, `server.address`, `server.port` | every script call inside one of crosslock's spans ([`SpanLevel::All`]: every script call) |
//! | `crosslock.release` | internal | `crosslock.object.type` | a lock's release ([`SpanLevel::All`]) |
//! | `crosslock.renewal` | internal | `crosslock.renewal.renewed`, `.gone`, `.failed` | a watchdog round ([`SpanLevel::All`]) |
//!
//! No argument values (holder ids, leases) are attributes; lock names are, with
//! `OpenTelemetry::with_lock_names`.
//!
//! Core calls the functions below at its few places; without the feature they hand the future
//! back as it is, and with it but without a tracer they cost a branch.

use std::future::Future;

use super::Telemetry;
use crate::telemetry::ObjectType;

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

#[cfg(feature = "opentelemetry")]
pub(crate) use imp::*;

#[cfg(not(feature = "opentelemetry"))]
mod off {
    use super::*;

    pub(crate) fn acquire<F: Future>(_: &Telemetry, _: ObjectType, _: &str, wait: F) -> F {
        wait
    }

    pub(crate) fn release<F: Future>(_: Option<&Telemetry>, _: ObjectType, _: &str, f: F) -> F {
        f
    }

    pub(crate) fn script<F: Future>(
        _: Option<&Telemetry>,
        _: &'static str,
        _: impl FnOnce() -> String,
        _: bool,
        call: F,
    ) -> F {
        call
    }

    /// A watchdog round's span: none without the feature.
    pub(crate) struct Round;

    impl Round {
        pub(crate) fn begin(_: Option<&Telemetry>) -> Option<Round> {
            None
        }

        pub(crate) fn within<F: Future>(_: &Option<Round>, f: F) -> F {
            f
        }

        pub(crate) fn end(self, _: [u32; 3]) {}
    }
}
#[cfg(not(feature = "opentelemetry"))]
pub(crate) use off::*;

#[cfg(feature = "opentelemetry")]
mod imp {
    use super::*;
    use crate::error::Result;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use opentelemetry::context::FutureExt as _;
    use opentelemetry::global::BoxedTracer;
    use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt, Tracer};
    use opentelemetry::{Context, KeyValue};

    use super::super::WaitOutcome;
    use super::super::instruments::attribute;

    /// What a client's spans are made with.
    pub(crate) struct Spans {
        pub(crate) tracer: Arc<BoxedTracer>,
        pub(crate) level: SpanLevel,
        pub(crate) names: bool,
    }

    impl std::fmt::Debug for Spans {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Spans").field("level", &self.level).finish()
        }
    }

    /// In the context of one of crosslock's spans: its script calls get spans. In an acquire's,
    /// its attempts (acquisition scripts) are counted.
    struct Inside {
        attempts: Option<Arc<AtomicU32>>,
    }

    impl Spans {
        fn start(
            &self,
            name: &'static str,
            attributes: Vec<KeyValue>,
            parent: &Context,
        ) -> Context {
            let builder = SpanBuilder::from_name(name)
                .with_kind(SpanKind::Internal)
                .with_attributes(attributes);
            let span = self.tracer.build_with_context(builder, parent);
            parent.with_span(span)
        }

        fn object(&self, object: ObjectType, name: &str) -> Vec<KeyValue> {
            let mut attributes = vec![KeyValue::new(attribute::OBJECT_TYPE, object.as_str())];
            if self.names {
                attributes.push(KeyValue::new(attribute::LOCK_NAME, name.to_owned()));
            }
            attributes
        }
    }

    /// Ends an acquire's span when dropped: with the outcome `acquire` set from its result, or as
    /// cancelled (the caller dropped the acquire).
    struct Acquiring {
        cx: Context,
        attempts: Arc<AtomicU32>,
        start: std::time::Instant,
        outcome: WaitOutcome,
    }

    impl Drop for Acquiring {
        fn drop(&mut self) {
            let span = self.cx.span();
            span.set_attribute(KeyValue::new(attribute::OUTCOME, self.outcome.as_str()));
            span.set_attribute(KeyValue::new(
                "crosslock.attempts",
                i64::from(self.attempts.load(Ordering::Relaxed)),
            ));
            span.set_attribute(KeyValue::new(
                "crosslock.wait.seconds",
                self.start.elapsed().as_secs_f64(),
            ));
            if matches!(self.outcome, WaitOutcome::Error | WaitOutcome::Unavailable) {
                span.set_status(Status::error(self.outcome.as_str()));
            }
            span.end();
        }
    }

    /// `wait`, an acquire of `object` named `name`, in a `crosslock.acquire` span (a child of
    /// the caller's current span) when `telemetry` has a tracer.
    pub(crate) async fn acquire<T>(
        telemetry: &Telemetry,
        object: ObjectType,
        name: &str,
        wait: impl Future<Output = Result<Option<T>>>,
    ) -> Result<Option<T>> {
        let Some(spans) = telemetry.spans.as_deref() else {
            return wait.await;
        };
        let attempts = Arc::new(AtomicU32::new(0));
        let cx = spans
            .start(
                "crosslock.acquire",
                spans.object(object, name),
                &Context::current(),
            )
            .with_value(Inside {
                attempts: Some(attempts.clone()),
            });
        let mut acquiring = Acquiring {
            cx: cx.clone(),
            attempts,
            start: std::time::Instant::now(),
            outcome: WaitOutcome::Cancelled,
        };
        let result = wait.with_context(cx).await;
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
        let cx = spans
            .start(
                "crosslock.release",
                spans.object(object, name),
                &Context::current(),
            )
            .with_value(Inside { attempts: None });
        let result = release.with_context(cx.clone()).await;
        if let Err(e) = &result {
            cx.span().set_status(Status::error(e.to_string()));
        }
        cx.span().end();
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
        let parent = Context::current();
        let inside = parent.get::<Inside>();
        if inside.is_none() && spans.level != SpanLevel::All {
            return call.await;
        }
        if acquisition && let Some(attempts) = inside.and_then(|i| i.attempts.as_ref()) {
            attempts.fetch_add(1, Ordering::Relaxed);
        }
        let address = address();
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), port.parse::<i64>().ok()),
            None => (address.clone(), None),
        };
        let mut attributes = vec![
            KeyValue::new("db.system.name", "redis"),
            KeyValue::new("db.operation.name", "EVALSHA"),
            KeyValue::new("crosslock.script", script),
            KeyValue::new("server.address", host),
        ];
        if let Some(port) = port {
            attributes.push(KeyValue::new("server.port", port));
        }
        let builder = SpanBuilder::from_name(format!("EVALSHA {script}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes);
        let span = spans.tracer.build_with_context(builder, &parent);
        let cx = parent.with_span(span);
        let result = call.await;
        if let Err(e) = &result {
            cx.span().set_status(Status::error(e.to_string()));
            cx.span()
                .set_attribute(KeyValue::new("error.type", e.kind().code()));
        }
        cx.span().end();
        result
    }

    /// A watchdog round's `crosslock.renewal` span, at [`SpanLevel::All`].
    pub(crate) struct Round {
        cx: Context,
    }

    impl Round {
        /// The round's span, if `telemetry` makes one.
        pub(crate) fn begin(telemetry: Option<&Telemetry>) -> Option<Round> {
            let spans = telemetry
                .and_then(|t| t.spans.as_deref())
                .filter(|s| s.level == SpanLevel::All)?;
            let cx = spans
                .start("crosslock.renewal", Vec::new(), &Context::new())
                .with_value(Inside { attempts: None });
            Some(Round { cx })
        }

        /// `f` (a part of the round) inside the round's span, if any.
        pub(crate) async fn within<F: Future>(round: &Option<Round>, f: F) -> F::Output {
            match round {
                Some(round) => f.with_context(round.cx.clone()).await,
                None => f.await,
            }
        }

        /// Ends the span with what the round renewed, found gone and failed to renew.
        pub(crate) fn end(self, [renewed, gone, failed]: [u32; 3]) {
            let span = self.cx.span();
            span.set_attribute(KeyValue::new(
                "crosslock.renewal.renewed",
                i64::from(renewed),
            ));
            span.set_attribute(KeyValue::new("crosslock.renewal.gone", i64::from(gone)));
            span.set_attribute(KeyValue::new("crosslock.renewal.failed", i64::from(failed)));
            span.end();
        }
    }
}
