"""``connect(url, spans=...)``: a client's acquires as OpenTelemetry spans, read back through the
SDK's in-memory exporter: a ``crosslock.acquire`` span under the caller's span (sync and asyncio,
each task's under its own) with its outcome, attempts and wait, an ``EVALSHA`` client span per
script call under it with the database conventions, releases and watchdog rounds at the ``all``
level only, names opt-in, bad arguments refused."""

from __future__ import annotations

import asyncio
from typing import Iterator, List, Tuple

import pytest

import crosslock
from crosslock.errors import InvalidArgumentError, InvalidArgumentTypeError
from support import wait_until

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode


@pytest.fixture
def sdk() -> Iterator[Tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def named(spans: "tuple[ReadableSpan, ...] | List[ReadableSpan]", name: str) -> List[ReadableSpan]:
    return [s for s in spans if s.name == name]


def children(spans: "tuple[ReadableSpan, ...]", parent: ReadableSpan) -> List[ReadableSpan]:
    pid = parent.context.span_id
    return [s for s in spans if s.parent is not None and s.parent.span_id == pid]


def test_an_acquire_is_a_span_under_the_callers_with_its_script_calls_under_it(url, sdk):
    provider, exporter = sdk
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    client = crosslock.connect(url, spans=provider)
    other = crosslock.connect(url)
    tracer = provider.get_tracer("test")
    try:
        # Held elsewhere for 0.3 s: the acquire waits, and tries again when the lease ends.
        assert other.lock("orders:1").acquire(lease=0.3)
        with tracer.start_as_current_span("request") as request:
            lock = client.lock("orders:1")
            assert lock.acquire(timeout=5)
            lock.release()
            free = client.lock("orders:2")
            assert free.acquire(timeout=0)
            free.release()
            busy = other.lock("orders:3")
            assert busy.acquire()
            assert not client.lock("orders:3").acquire(timeout=0.05)
            busy.release()
    finally:
        client.close()  # tells every span before it returns
        other.close()
    spans = exporter.get_finished_spans()
    acquires = named(spans, "crosslock.acquire")
    assert len(acquires) == 3, [s.name for s in spans]
    for acquire in acquires:
        assert acquire.parent is not None and acquire.parent.span_id == request.get_span_context().span_id
        assert acquire.context.trace_id == request.get_span_context().trace_id
        assert acquire.kind == SpanKind.INTERNAL
        assert acquire.attributes["crosslock.object.type"] == "lock"
        assert "crosslock.lock.name" not in acquire.attributes
        assert acquire.start_time <= acquire.end_time
        calls = children(spans, acquire)
        assert len(calls) == acquire.attributes["crosslock.attempts"] >= 1
        for call in calls:
            assert call.name == "EVALSHA lock/acquire"
            assert call.kind == SpanKind.CLIENT
            assert dict(call.attributes) == {
                "db.system.name": "redis",
                "db.operation.name": "EVALSHA",
                "crosslock.script": "lock/acquire",
                "server.address": "127.0.0.1",
                "server.port": port,
            }
            assert acquire.start_time <= call.start_time <= call.end_time <= acquire.end_time
    contended, free, timed_out = acquires
    assert contended.attributes["crosslock.outcome"] == "acquired"
    assert contended.attributes["crosslock.attempts"] >= 2
    assert contended.attributes["crosslock.wait.seconds"] >= 0.2
    assert free.attributes["crosslock.outcome"] == "acquired"
    assert free.attributes["crosslock.attempts"] == 1
    assert timed_out.attributes["crosslock.outcome"] == "timeout"
    assert timed_out.status.status_code != StatusCode.ERROR  # busy is not a failure
    # At the default level a release is no span, nor are its script calls.
    assert not named(spans, "crosslock.release")
    assert not named(spans, "EVALSHA lock/release")


async def test_each_asyncio_task_s_acquire_is_under_that_task_s_span(url, sdk):
    provider, exporter = sdk
    client = await crosslock.connect_async(url, spans=provider, spans_with_names=True)
    tracer = provider.get_tracer("test")
    parents = {}

    async def task(n: int) -> None:
        with tracer.start_as_current_span(f"task {n}") as span:
            parents[f"jobs:{n}"] = span.get_span_context().span_id
            lock = client.lock(f"jobs:{n}")
            assert await lock.acquire_async(timeout=5)
            await asyncio.sleep(0.01)
            await lock.release_async()

    try:
        await asyncio.gather(*(task(n) for n in range(4)))
    finally:
        await client.aclose()
    acquires = named(exporter.get_finished_spans(), "crosslock.acquire")
    assert len(acquires) == 4
    for acquire in acquires:
        name = acquire.attributes["crosslock.lock.name"]
        assert acquire.parent is not None and acquire.parent.span_id == parents[name], name


def test_at_the_all_level_releases_and_watchdog_rounds_are_spans_too(url, sdk):
    provider, exporter = sdk
    client = crosslock.connect(url, watchdog_timeout=1.5, spans=provider, spans_level="all")
    try:
        lock = client.lock("orders:9")
        assert lock.acquire()
        # A round every half second renews the watched hold.
        wait_until(
            lambda: any(
                s.attributes.get("crosslock.renewal.renewed") == 1
                for s in named(exporter.get_finished_spans(), "crosslock.renewal")
            ),
            what="a watchdog round's span",
        )
        lock.release()
        assert not lock.locked()
    finally:
        client.close()
    spans = exporter.get_finished_spans()
    rounds = [s for s in named(spans, "crosslock.renewal") if s.attributes["crosslock.renewal.renewed"] == 1]
    assert rounds[0].parent is None
    assert [c.name for c in children(spans, rounds[0])] == ["EVALSHA renewal/hash"]
    (release,) = named(spans, "crosslock.release")
    assert release.attributes["crosslock.object.type"] == "lock"
    assert [c.name for c in children(spans, release)] == ["EVALSHA lock/release"]
    # Every other script call is a span of its own (a root, without a caller's span).
    assert any(s.name.startswith("EVALSHA ") and s.parent is None for s in spans), [s.name for s in spans]


def test_without_spans_none_is_made_and_bad_arguments_are_refused(url, sdk):
    provider, exporter = sdk
    with crosslock.connect(url) as client:
        with provider.get_tracer("test").start_as_current_span("request"):
            with client.lock("orders:5"):
                pass
    assert [s.name for s in exporter.get_finished_spans()] == ["request"]
    with pytest.raises(InvalidArgumentError, match="spans_level must be 'acquires'"):
        crosslock.connect(url, spans=provider, spans_level="some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TracerProvider"):
        crosslock.connect(url, spans=object())
    with pytest.raises(InvalidArgumentTypeError, match="spans_with_names must be a bool"):
        crosslock.connect(url, spans=provider, spans_with_names="yes")  # type: ignore[arg-type]
