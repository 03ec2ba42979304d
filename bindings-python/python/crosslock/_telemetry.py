"""A client's waits, holds, renewals, subscriptions and connections as OpenTelemetry metrics:
``connect(url, metrics=True)`` (the global MeterProvider) or ``connect(url, metrics=provider)``.
Core measures; the native module hands the measurements here in batches on a thread of its own
(``crosslock-telemetry``), and this module records them on the instruments of core's table
(``_native.TELEMETRY_INSTRUMENTS``). Nothing is measured without ``metrics``, and
``opentelemetry-api`` is imported only then."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__: list[str] = []

#: One measurement as the native module hands it over: (index into ``TELEMETRY_INSTRUMENTS``,
#: value, ((attribute key, value), ...), the object's name or None). See
#: ``bindings-python/src/telemetry.rs``.
Measurement = Tuple[int, float, Tuple[Tuple[str, str], ...], Optional[str]]

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
    if metrics is None or metrics is False:
        return None
    try:
        from opentelemetry import metrics as otel
    except ImportError:
        raise ImportError(
            "crosslock: connect(metrics=...) records OpenTelemetry metrics and needs the "
            "opentelemetry-api package: pip install opentelemetry-api (and an SDK, e.g. "
            "opentelemetry-sdk, to export them)"
        ) from None
    provider = otel.get_meter_provider() if metrics is True else metrics
    if not callable(getattr(provider, "get_meter", None)):
        raise TypeError(
            f"crosslock: metrics must be True (OpenTelemetry's global MeterProvider), False, or a "
            f"MeterProvider; got {type(provider).__name__}"
        )
    from . import __version__

    return _Metrics(provider.get_meter("crosslock", __version__))
