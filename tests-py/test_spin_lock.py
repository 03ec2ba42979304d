"""crosslock.SpinLock: waiters retry with a back-off and never subscribe, and a release publishes
nothing; it excludes a Lock of the same name."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import crosslock
from support import channel, wait_until


def script_calls(raw) -> int:
    """How many scripts Redis ran so far: a spin waiter's retries."""
    total = 0
    for line in raw.command("INFO", "commandstats").splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:")):
            total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


def test_a_waiter_never_subscribes_and_gets_the_lock_by_retrying(client, url, raw, redis_server):
    name = "reports:nightly"
    with crosslock.connect(url) as other:
        held = other.spin_lock(name)
        assert held.acquire(lease=60)
        lock = client.spin_lock(name, backoff=crosslock.Backoff.constant(0.01))
        result: dict[str, Any] = {}

        def waiter() -> None:
            result["holder"] = client.holder()
            result["acquired"] = bool(lock.acquire(timeout=30))
            result["layout"] = raw.hgetall(name)
            lock.release()

        calls = script_calls(raw)
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        # While it waits, retrying: no subscription to any channel, ever.
        retries_seen = 0

        def retried_a_lot() -> bool:
            nonlocal retries_seen
            assert raw.command("PUBSUB", "NUMSUB", channel(name)) == [channel(name), 0]
            assert raw.command("PUBSUB", "CHANNELS", "*") == []
            assert raw.command("PUBSUB", "NUMPAT") == 0
            retries_seen = script_calls(raw) - calls
            return retries_seen >= 10

        wait_until(retried_a_lot, what="the spin waiter to retry")
        assert "acquired" not in result
        with redis_server.raw() as sub:
            sub.subscribe(channel(name))
            held.release()
            raw.command("PUBLISH", channel(name), "marker")
            # The release published nothing: the marker is the first message.
            assert sub.next_message(timeout=10) == ["message", channel(name), "marker"]
        t.join(10)
        assert result["acquired"] is True
        assert result["layout"] == {result["holder"]: "1"}
        assert raw.command("PUBSUB", "CHANNELS", "*") == []
    assert raw.command("KEYS", "*") == []


async def test_an_asyncio_waiter_never_subscribes(client, url, raw):
    name = "spin-async"
    with crosslock.connect(url) as other:
        held = other.spin_lock(name)
        assert await held.acquire_async(lease=60)
        lock = client.spin_lock(name)
        assert await lock.acquire_async(timeout=0.3) is False
        assert raw.command("PUBSUB", "CHANNELS", "*") == []
        held.release()
        async with lock:
            assert raw.hgetall(name) == {client.holder(): "1"}
    assert raw.command("KEYS", "*") == []


def test_it_excludes_a_lock_of_the_same_name_both_ways(client, url):
    name = "spin-shared"
    with crosslock.connect(url) as other:
        with client.spin_lock(name):
            assert not other.lock(name).acquire(blocking=False)
        plain = other.lock(name)
        assert plain.acquire()
        assert not client.spin_lock(name).acquire(timeout=0.2)
        plain.release()


BAD_BACKOFFS = {
    "zero": crosslock.Backoff.constant(0),
    "negative": crosslock.Backoff.constant(-1),
    "nan": crosslock.Backoff.constant(float("nan")),
    "max-below-initial": crosslock.Backoff.exponential(0.2, 0.1),
    "over-an-hour": crosslock.Backoff.exponential(0.001, 7200),
}


@pytest.mark.parametrize("backoff", BAD_BACKOFFS.values(), ids=BAD_BACKOFFS.keys())
def test_a_bad_backoff_is_refused(client, raw, backoff):
    with pytest.raises(crosslock.InvalidArgumentError) as info:
        client.spin_lock("spin-bad", backoff=backoff)
    assert info.value.lock_name == "spin-bad" and info.value.code == "INVALID_ARGUMENT"
    message = str(info.value)
    assert "'spin-bad'" in message, message
    assert "(" not in message.split(":")[0] and "ns)" not in message, message  # no Rust Debug form
    assert raw.command("KEYS", "*") == []


def test_a_backoff_must_be_a_backoff(client):
    with pytest.raises(crosslock.InvalidArgumentTypeError):
        client.spin_lock("spin-bad", backoff=0.01)  # type: ignore[arg-type]
