"""A client's waits and holds as OpenTelemetry metrics: ``connect(url, metrics=True)`` (the global
MeterProvider) or ``connect(url, metrics=provider)``. Core measures; the native module hands the
events here in batches on a thread of its own (``crosslock-telemetry``), and this module records
them on the instruments below. Nothing is measured without ``metrics``, and ``opentelemetry-api``
is imported only then."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

__all__: list[str] = []

#: One event as the native module hands it over: (what, object type, name or None, label or None,
#: seconds). See ``bindings-python/src/telemetry.rs``.
Event = Tuple[str, str, Optional[str], Optional[str], float]

#: Bucket bounds of the wait histogram, in seconds (core's ``telemetry::OpenTelemetry`` uses the
#: same): from an uncontended acquire's fraction of a millisecond to a minute's wait.
WAIT_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Bucket bounds of the hold histogram, in seconds: from a millisecond to an hour.
HOLD_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class _Metrics:
    """The instruments of one client, fed by the native module's batches."""

    __slots__ = ("_wait", "_waiters", "_hold", "_held", "_lost", "_wakeups")

    def __init__(self, meter: Any) -> None:
        self._wait = _histogram(
            meter, "crosslock.lock.wait.duration",
            "How long acquires (and latch waits) waited, by how they ended", WAIT_BOUNDS,
        )
        self._waiters = meter.create_up_down_counter(
            "crosslock.lock.waiters", unit="{waiter}",
            description="Acquires (and latch waits) of this process waiting now",
        )
        self._hold = _histogram(
            meter, "crosslock.lock.hold.duration",
            "How long holds lasted, until released or found lost", HOLD_BOUNDS,
        )
        self._held = meter.create_up_down_counter(
            "crosslock.lock.held", unit="{hold}",
            description="Locks and expirable permits this process holds now",
        )
        self._lost = meter.create_counter(
            "crosslock.lock.lost", unit="{hold}", description="Holds found lost, by why",
        )
        self._wakeups = meter.create_counter(
            "crosslock.wait.wakeups", unit="{wakeup}",
            description="Waiting acquires woken to try again, by what woke them (timer wake-ups "
            "beside few messages are missed wake-ups)",
        )

    def __call__(self, batch: List[Event]) -> None:
        for what, object_type, name, label, seconds in batch:
            if what == "woken":
                self._wakeups.add(1, {"crosslock.wake.cause": label or ""})
                continue
            attributes: Dict[str, str] = {"crosslock.object.type": object_type}
            if name is not None:
                attributes["crosslock.lock.name"] = name
            if what == "wait_began":
                self._waiters.add(1, attributes)
            elif what == "wait_ended":
                self._waiters.add(-1, attributes)
                self._wait.record(seconds, {**attributes, "crosslock.outcome": label or ""})
            elif what == "hold_began":
                self._held.add(1, attributes)
            elif what == "hold_ended":
                self._held.add(-1, attributes)
                end, _, reason = (label or "").partition(":")
                self._hold.record(seconds, {**attributes, "crosslock.hold.end": end})
                if end == "lost":
                    self._lost.add(1, {**attributes, "crosslock.lost.reason": reason})


def _histogram(meter: Any, name: str, description: str, bounds: Tuple[float, ...]) -> Any:
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=list(bounds)
        )
    except TypeError:  # opentelemetry-api before 1.23 takes no advisory bounds
        return meter.create_histogram(name, unit="s", description=description)


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
