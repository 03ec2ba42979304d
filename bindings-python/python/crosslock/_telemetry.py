"""A client's waits, holds, renewals, subscriptions and connections as OpenTelemetry metrics:
``connect(url, metrics=True)`` (the global MeterProvider) or ``connect(url, metrics=provider)``;
its acquires (with their script calls) as spans: ``connect(url, spans=True)`` (the global
TracerProvider) or ``connect(url, spans=provider)``. Core measures and makes the spans; the native
module hands them here in batches on a thread of its own (``crosslock-telemetry``), and this module
records the measurements on the instruments of core's table (``_native.TELEMETRY_INSTRUMENTS``) and
replays each ended span, with its times, under the context that was current where its call was
made. Nothing is measured without ``metrics``, no span is made without ``spans``, and
``opentelemetry-api`` is imported only then."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__: list[str] = []

#: One measurement as the native module hands it over: (index into ``TELEMETRY_INSTRUMENTS``,
#: value, ((attribute key, value), ...), the object's name or None). See
#: ``bindings-python/src/telemetry.rs``.
Measurement = Tuple[int, float, Tuple[Tuple[str, str], ...], Optional[str]]

#: One ended span as the native module hands it over: (name, "internal" or "client", start ns,
#: end ns, attributes, error description or None, children, the caller's context or None). See
#: ``bindings-python/src/telemetry.rs``.
Span = Tuple[str, str, int, int, Dict[str, Union[str, int, float]], Optional[str], List[Any], Any]

#: The attribute an object's name goes under (``metrics_with_names=True``).
LOCK_NAME = "crosslock.lock.name"


class _Metrics:
    """The instruments of one client, made from core's table (``_native.TELEMETRY_INSTRUMENTS``)
    and fed by the native module's batches."""

    __slots__ = ("_record",)

    def __init__(self, meter: Any) -> None:
        from ._native import TELEMETRY_INSTRUMENTS

        self._record: List[Callable[[float, Dict[str, str]], None]] = [
            _instrument(meter, *row) for row in TELEMETRY_INSTRUMENTS
        ]

    def __call__(self, batch: List[Measurement]) -> None:
        record = self._record
        for index, value, pairs, name in batch:
            attributes = dict(pairs)
            if name is not None:
                attributes[LOCK_NAME] = name
            record[index](value, attributes)


def _instrument(
    meter: Any, name: str, kind: str, unit: str, description: str,
    bounds: Tuple[float, ...], _keys: Tuple[str, ...],
) -> Callable[[float, Dict[str, str]], None]:
    """The instrument ``name`` made on ``meter``, as the function that records a value on it."""
    if kind == "histogram":
        try:
            histogram = meter.create_histogram(
                name, unit=unit, description=description,
                explicit_bucket_boundaries_advisory=list(bounds),
            )
        except TypeError:  # opentelemetry-api before 1.23 takes no advisory bounds
            histogram = meter.create_histogram(name, unit=unit, description=description)
        record: Callable[[float, Dict[str, str]], None] = histogram.record
        return record
    if kind == "counter":
        counter = meter.create_counter(name, unit=unit, description=description)
        return lambda value, attributes: counter.add(int(value), attributes)
    if kind == "up_down_counter":
        up_down = meter.create_up_down_counter(name, unit=unit, description=description)
        return lambda value, attributes: up_down.add(int(value), attributes)
    raise AssertionError(f"crosslock: unknown instrument kind {kind!r} for {name}")


def sink(metrics: Union[bool, Any, None]) -> Optional[_Metrics]:
    """What records the events of a client connected with ``metrics``: ``None`` when nothing is to
    be measured (``None`` or ``False``), the global MeterProvider's instruments for ``True``, a
    given MeterProvider's otherwise."""
    what = "connect(metrics=...) records OpenTelemetry metrics"
    provider = _provider(metrics, "metrics", what, "MeterProvider")
    if provider is None:
        return None
    from . import __version__

    return _Metrics(provider.get_meter("crosslock", __version__))


class _Spans:
    """Replays a client's ended spans on a tracer: each under the context its call was made in
    (a root's parent), its script calls under it, with the times core measured."""

    __slots__ = ("_tracer", "_kinds", "_trace", "_root")

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import context, trace

        self._tracer = tracer
        self._trace = trace
        self._kinds = {"internal": trace.SpanKind.INTERNAL, "client": trace.SpanKind.CLIENT}
        self._root = context.Context()

    def __call__(self, spans: List[Span]) -> None:
        for span in spans:
            self._replay(span, None)

    def _replay(self, span: Span, inside: Any) -> None:
        name, kind, start, end, attributes, error, children, parent = span
        if inside is None:
            inside = parent if parent is not None else self._root
        made = self._tracer.start_span(
            name, context=inside, kind=self._kinds[kind], attributes=attributes, start_time=start,
        )
        if error is not None:
            made.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        if children:
            within = self._trace.set_span_in_context(made, inside)
            for child in children:
                self._replay(child, within)
        made.end(end_time=end)


#: The values of ``connect(spans_level=...)``.
SPAN_LEVELS = ("acquires", "all")


def span_sink(spans: Union[bool, Any, None]) -> Optional[_Spans]:
    """What replays the spans of a client connected with ``spans``: ``None`` when no span is to be
    made (``None`` or ``False``), the global TracerProvider's tracer for ``True``, a given
    TracerProvider's otherwise."""
    what = "connect(spans=...) makes OpenTelemetry spans"
    provider = _provider(spans, "trace", what, "TracerProvider")
    if provider is None:
        return None
    from . import __version__

    return _Spans(provider.get_tracer("crosslock", __version__))


def _provider(asked: Union[bool, Any, None], api: str, what: str, kind: str) -> Any:
    """The provider ``connect`` was asked for: ``None`` for ``None`` or ``False``, OpenTelemetry's
    global one of ``kind`` (``opentelemetry.<api>``) for ``True``, else ``asked`` itself, once it is
    shaped as a ``kind``. ``what`` says what needs the API when it is not installed."""
    if asked is None or asked is False:
        return None
    try:
        module = importlib.import_module(f"opentelemetry.{api}")
    except ImportError:
        raise ImportError(
            f"crosslock: {what} and needs the opentelemetry-api package: pip install "
            f"opentelemetry-api (and an SDK, e.g. opentelemetry-sdk, to export them)"
        ) from None
    getter = "get_meter" if api == "metrics" else "get_tracer"
    provider = getattr(module, f"{getter}_provider")() if asked is True else asked
    if not callable(getattr(provider, getter, None)):
        raise TypeError(
            f"crosslock: {'spans' if api == 'trace' else 'metrics'} must be True (OpenTelemetry's "
            f"global {kind}), False, or a {kind}; got {type(provider).__name__}"
        )
    return provider
