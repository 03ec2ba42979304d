"""``connect(url, metrics=...)``: a client's waits, holds, losses and wake-ups as OpenTelemetry
metrics, read back through the SDK's in-memory reader: names, units, attributes and values for a
wait that times out, a contended acquire, a lost lock, a close; none without ``metrics``."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Iterator, Tuple

import pytest

import crosslock
from support import wait_until

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader


@pytest.fixture
def sdk() -> Iterator[Tuple[MeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def points(reader: InMemoryMetricReader) -> Dict[str, Tuple[str, Dict[frozenset, Any]]]:
    """Every instrument read: its unit, and per attribute set a sum's value or a histogram's
    (count, sum)."""
    out: Dict[str, Tuple[str, Dict[frozenset, Any]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                values = {}
                for p in m.data.data_points:
                    key = frozenset(dict(p.attributes).items())
                    values[key] = (p.count, p.sum) if hasattr(p, "count") else p.value
                out[m.name] = (m.unit, values)
    return out


def attrs(**kv: str) -> frozenset:
    return frozenset({f"crosslock.{k.replace('_', '.')}": v for k, v in kv.items()}.items())


LOCK = {"object_type": "lock"}


def telemetry_threads() -> list:
    """The native telemetry threads of this process (``crosslock-telemetry``, as the kernel
    shortens it), a joined one given a moment to be reaped."""
    def names() -> list:
        out = []
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/comm") as f:
                    out.append(f.read().strip())
            except FileNotFoundError:
                pass  # a thread that just ended
        return [n for n in out if n == "crosslock-telem"]
    deadline = time.monotonic() + 5
    while names() and time.monotonic() < deadline:
        time.sleep(0.005)
    return names()


def test_waits_holds_losses_and_wakeups_are_metrics(url, sdk, raw):
    provider, reader = sdk
    client = crosslock.connect(url, watchdog_timeout=3.0, metrics=provider)
    other = crosslock.connect(url)
    try:
        held, timed_out = threading.Event(), threading.Event()

        def holder() -> None:
            # The other client's hold, taken and given back on this thread of its own once the
            # main thread's acquire has waited a while.
            theirs = other.lock("orders:1")
            assert theirs.acquire()
            held.set()
            timed_out.wait(10)
            wait_until(
                lambda: points(reader).get("crosslock.lock.waiters", ("", {}))[1].get(attrs(**LOCK)) == 1,
                what="the waiter counted",
            )
            # Subscribed, so that the release's message is what wakes it (an event, not a
            # guess); the pause makes the wait at least 0.2 s long.
            channel = "redisson_lock__channel:{orders:1}"
            wait_until(lambda: raw.command("PUBSUB", "NUMSUB", channel)[1] == 1, what="the waiter subscribed")
            time.sleep(0.2)
            theirs.release()  # a contended acquire: woken by the release's message

        lock = client.lock("orders:1")
        releaser = threading.Thread(target=holder)
        releaser.start()
        held.wait(10)
        assert not lock.acquire(timeout=0.1)  # a wait that times out
        timed_out.set()
        assert lock.acquire(timeout=10)
        releaser.join()

        def settled():
            p = points(reader)
            waits = p.get("crosslock.lock.wait.duration", ("", {}))[1]
            return attrs(**LOCK, outcome="acquired") in waits and p
        p = wait_until(settled, what="the hold counted")
        unit, waits = p["crosslock.lock.wait.duration"]
        assert unit == "s"
        assert waits[attrs(**LOCK, outcome="timeout")][0] == 1
        count, total = waits[attrs(**LOCK, outcome="acquired")]
        assert count == 1 and total >= 0.2  # it waited at least as long as the release came later
        assert p["crosslock.lock.waiters"] == ("{waiter}", {attrs(**LOCK): 0})
        assert p["crosslock.wait.wakeups"][0] == "{wakeup}"
        assert p["crosslock.wait.wakeups"][1][attrs(wake_cause="message")] >= 1

        # Lost to a force-unlock: counted by reason, the hold's time recorded as ended by loss.
        other.lock("orders:1").force_unlock()
        wait_until(lambda: lock.lost, what="the renewal to find the hold gone")

        def lost():
            p = points(reader)
            return "crosslock.lock.lost" in p and p
        p = wait_until(lost, what="the loss counted")
        assert p["crosslock.lock.lost"] == ("{hold}", {attrs(**LOCK, lost_reason="gone"): 1})
        assert p["crosslock.lock.hold.duration"][1][attrs(**LOCK, hold_end="lost")][0] == 1
        assert p["crosslock.lock.held"][1][attrs(**LOCK)] == 0
        with pytest.raises(crosslock.LockLostError):
            lock.release()
        # The watchdog round that found it gone, by outcome, and timed; the waiter's
        # subscription counted up and (its channel left, or the client closed) down.
        unit, renewals = p["crosslock.watchdog.renewals"]
        assert unit == "{hold}" and renewals[attrs(renewal_outcome="gone")] == 1
        unit, rounds = p["crosslock.watchdog.renewal.duration"]
        assert unit == "s" and rounds[frozenset()][0] >= 1

        # A lease that runs out: lost as expired.
        leased = client.lock("orders:2")
        assert leased.acquire(lease=0.2)
        wait_until(lambda: leased.lost, what="the lease to run out")

        def expired():
            p = points(reader)
            return attrs(**LOCK, lost_reason="expired") in p["crosslock.lock.lost"][1] and p
        p = wait_until(expired, what="the expiry counted")
        assert p["crosslock.lock.lost"][1] == {
            attrs(**LOCK, lost_reason="gone"): 1,
            attrs(**LOCK, lost_reason="expired"): 1,
        }
        assert p["crosslock.lock.hold.duration"][1][attrs(**LOCK, hold_end="lost")][0] == 2
        assert p["crosslock.lock.held"][1][attrs(**LOCK)] == 0
    finally:
        client.close()
        other.close()
    assert points(reader)["crosslock.pubsub.subscriptions"] == ("{subscription}", {frozenset(): 0})


def test_instruments_are_cores_table():
    """What the package makes on a meter is core's table, one instrument per row, with its
    kind, unit and histogram bounds (one spelling: crosslock::telemetry::Instrument)."""
    from opentelemetry.sdk.metrics import Counter, Histogram, UpDownCounter

    from crosslock import _native, _telemetry

    made: Dict[str, Any] = {}

    class Meter:
        def create_histogram(self, name, unit, description, explicit_bucket_boundaries_advisory=None):
            made[name] = (Histogram, unit, tuple(explicit_bucket_boundaries_advisory or ()))
            return type("H", (), {"record": lambda *a: None})()

        def create_counter(self, name, unit, description):
            made[name] = (Counter, unit, ())
            return type("C", (), {"add": lambda *a: None})()

        def create_up_down_counter(self, name, unit, description):
            made[name] = (UpDownCounter, unit, ())
            return type("U", (), {"add": lambda *a: None})()

    _telemetry._Metrics(Meter())
    kinds = {"histogram": Histogram, "counter": Counter, "up_down_counter": UpDownCounter}
    table = {row[0]: (kinds[row[1]], row[2], row[4]) for row in _native.TELEMETRY_INSTRUMENTS}
    assert made == table
    assert {
        "crosslock.lock.wait.duration", "crosslock.lock.hold.duration", "crosslock.lock.lost",
        "crosslock.lock.held", "crosslock.lock.waiters", "crosslock.watchdog.renewals",
        "crosslock.watchdog.renewal.duration", "crosslock.pubsub.subscriptions",
        "crosslock.wait.wakeups", "crosslock.connection.events",
    } == set(table)


def test_close_tells_every_event_before_it_returns_and_names_are_opt_in(url, sdk):
    provider, reader = sdk
    client = crosslock.connect(url, metrics=provider, metrics_with_names=True)
    sem = client.semaphore("pool")
    sem.try_set_permits(1)
    assert sem.acquire(timeout=0)
    client.fair_lock("report").acquire()
    client.close()  # the fair lock's hold ends released at close, told before close returns
    p = points(reader)
    held = p["crosslock.lock.held"][1]
    assert held == {attrs(object_type="fair_lock", lock_name="report"): 0}
    waits = p["crosslock.lock.wait.duration"][1]
    assert waits[attrs(object_type="semaphore", lock_name="pool", outcome="acquired")][0] == 1
    assert p["crosslock.lock.hold.duration"][1][
        attrs(object_type="fair_lock", lock_name="report", hold_end="released")
    ][0] == 1
    # No thread left behind by close.
    assert telemetry_threads() == []


def test_without_metrics_nothing_is_measured(url, sdk):
    provider, reader = sdk
    with crosslock.connect(url) as client:
        with client.lock("quiet"):
            pass
    assert points(reader) == {}
    assert telemetry_threads() == []


def test_bad_metrics_argument_is_refused_with_what_to_pass(url):
    with pytest.raises(TypeError, match="MeterProvider"):
        crosslock.connect(url, metrics="prometheus")


async def test_asyncio_waits_are_measured_too(url, sdk):
    provider, reader = sdk
    client = await crosslock.connect_async(url, metrics=provider)
    try:
        lock = client.lock("orders:async")
        async with lock:
            pass
    finally:
        await client.aclose()
    wait_until(lambda: "crosslock.lock.hold.duration" in points(reader), what="the hold told")
    p = points(reader)
    assert p["crosslock.lock.wait.duration"][1][attrs(**LOCK, outcome="acquired")][0] == 1
    assert p["crosslock.lock.hold.duration"][1][attrs(**LOCK, hold_end="released")][0] == 1
