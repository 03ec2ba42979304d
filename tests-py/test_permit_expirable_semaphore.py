"""crosslock.PermitExpirableSemaphore: permits with ids (released by id, by anyone, once), leases
that can be updated, expired permits counted back, a crashed holder's permit coming back after its
watchdog lease, and a live holder's permit kept by the watchdog."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Iterator

import pytest

import crosslock
from support import Raw, poll, python_env, wait_until

WATCHDOG = 0.5


def timeout_zset(name: str) -> str:
    return f"{{{name}}}:timeout"


def sc_channel(name: str) -> str:
    return f"redisson_sc:{{{name}}}"


def permits_out(raw: Raw, name: str) -> dict[str, int]:
    """The taken permits in Redis: id (hex of the 16 raw bytes) → expiry in epoch ms."""
    flat = raw.command("ZRANGE", timeout_zset(name), 0, -1, "WITHSCORES")
    return {m.encode("utf-8", "surrogateescape").hex(): int(float(s)) for m, s in zip(flat[::2], flat[1::2])}


@pytest.fixture
def short(url: str) -> Iterator[crosslock.Client]:
    c = crosslock.connect(url, watchdog_timeout=WATCHDOG)
    try:
        yield c
    finally:
        c.close()


def test_a_permit_has_a_32_hex_id_stored_as_16_bytes_with_its_expiry(client, raw):
    name = "licences"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(2) and not sem.try_set_permits(5)
    before = int(time.time() * 1000)
    permit = sem.acquire(lease=60)
    after = int(time.time() * 1000)
    assert isinstance(permit, str) and re.fullmatch(r"[0-9a-f]{32}", permit), permit
    out = permits_out(raw, name)
    assert list(out) == [permit]
    assert before + 60_000 - 50 <= out[permit] <= after + 60_000 + 50
    assert raw.command("GET", name) == "1" and sem.available_permits() == 1
    second = sem.acquire(timeout=0)
    assert second is not None and second != permit
    assert sem.acquire(timeout=0) is None  # none left
    assert sem.acquire(timeout=0.2) is None
    sem.release(permit)
    sem.release(second)
    assert raw.command("GET", name) == "2"
    assert raw.command("EXISTS", timeout_zset(name)) == 0


def test_release_by_id_from_another_client_and_a_released_id_is_refused(client, other, raw, redis_server):
    name = "by-id"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    permit = sem.acquire(lease=60)
    with redis_server.raw() as sub:
        sub.subscribe(sc_channel(name))
        other.permit_expirable_semaphore(name).release(permit)  # anyone may, with the id
        assert sub.next_message(timeout=10) == ["message", sc_channel(name), "1"]
    assert raw.command("GET", name) == "1" and permits_out(raw, name) == {}
    with pytest.raises(crosslock.NotHeldError) as info:
        sem.release(permit)  # once only: never counted back twice
    assert permit in str(info.value) and info.value.lock_name == name
    assert sem.try_release(permit) is False
    assert raw.command("GET", name) == "1"
    with pytest.raises(crosslock.InvalidArgumentError):
        sem.release("not-an-id")
    assert sem.try_release("0" * 32) is False
    assert raw.command("GET", name) == "1"


def test_update_lease(client, raw):
    name = "leases"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    permit = sem.acquire(lease=60)
    first = permits_out(raw, name)[permit]
    assert 59 < sem.remaining_lease(permit) <= 60
    assert sem.update_lease(permit, 120) is True
    assert 119 < sem.remaining_lease(permit) <= 120
    assert permits_out(raw, name)[permit] >= first + 59_000
    assert sem.update_lease(permit, 0.3) is True  # shorter works too
    assert sem.remaining_lease(permit) <= 0.3
    assert sem.update_lease("0" * 32, 10) is False  # no such permit
    assert sem.remaining_lease("0" * 32) is None
    # After the updated lease it is counted back.
    wait_until(lambda: sem.available_permits() == 1, what="the 0.3 s lease to run out")
    assert sem.update_lease(permit, 10) is False
    assert permits_out(raw, name) == {}


def test_an_expired_permit_is_counted_back_and_its_id_refused(client, other, raw):
    name = "expiring"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    stale = sem.acquire(lease=0.2)
    # Another client waits (no limit in the test's time): it gets the permit once it expired.
    fresh = other.permit_expirable_semaphore(name).acquire(timeout=30)
    assert fresh is not None and fresh != stale
    assert list(permits_out(raw, name)) == [fresh]
    with pytest.raises((crosslock.NotHeldError, crosslock.LockLostError)):
        sem.release(stale)
    assert list(permits_out(raw, name)) == [fresh]  # the stale id took nothing from the new holder
    assert raw.command("GET", name) == "0"
    other.permit_expirable_semaphore(name).release(fresh)
    assert raw.command("GET", name) == "1"


def test_releasing_an_expired_permit_says_it_was_lost(client, raw):
    name = "expired-release"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    permit = sem.acquire(lease=0.2)
    time.sleep(0.3)  # the lease passes (the point of the test); nobody touches the semaphore
    with pytest.raises(crosslock.LockLostError) as info:
        sem.release(permit)
    assert permit in str(info.value)
    assert raw.command("GET", name) == "1"  # counted back once
    with pytest.raises(crosslock.NotHeldError):
        sem.release(permit)
    assert raw.command("GET", name) == "1"


KILLED_HOLDER = textwrap.dedent(
    """
    import sys, time, crosslock
    client = crosslock.connect(sys.argv[1], watchdog_timeout=1.0)
    permit = client.permit_expirable_semaphore("seats").acquire()
    print(permit, flush=True)
    time.sleep(120)
    """
)


def test_a_permit_of_a_holder_killed_with_kill_9_comes_back_after_its_lease(client, url, raw):
    name = "seats"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_HOLDER, url], stdout=subprocess.PIPE, text=True, env=python_env()
    )
    try:
        permit = child.stdout.readline().strip()
        assert re.fullmatch(r"[0-9a-f]{32}", permit), f"the child did not acquire: {permit!r}"
        assert list(permits_out(raw, name)) == [permit]
        assert sem.acquire(blocking=False) is None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        child.stdout.close()
    # Nobody renews it any more: within its 1 s lease it is counted back, and a waiter gets it.
    mine = sem.acquire(timeout=30)
    assert mine is not None and mine != permit
    assert list(permits_out(raw, name)) == [mine]
    sem.release(mine)
    assert raw.command("GET", name) == "1"


def test_a_live_holder_keeps_its_permit_past_the_watchdog_lease(short, other, raw):
    name = "kept"
    lost: list[str] = []
    sem = short.permit_expirable_semaphore(name, on_lost=lambda s, pid: lost.append(pid))
    assert sem.try_set_permits(1)
    permit = sem.acquire()  # no lease: the watchdog keeps it
    first_expiry = permits_out(raw, name)[permit]
    assert first_expiry <= int(time.time() * 1000) + WATCHDOG * 1000
    contender = other.permit_expirable_semaphore(name)
    until = time.monotonic() + 2.6 * WATCHDOG
    while time.monotonic() < until:
        assert contender.acquire(blocking=False) is None, "a kept permit was given to another"
        assert list(permits_out(raw, name)) == [permit]
        time.sleep(0.05)
    assert permits_out(raw, name)[permit] > first_expiry  # renewed
    assert not sem.lost(permit) and lost == []
    sem.release(permit)  # no LockLostError
    assert raw.command("GET", name) == "1"


def test_a_permit_released_behind_the_holders_back_is_reported_lost(short, other, raw):
    name = "stolen"
    fired = threading.Event()
    seen: list[tuple[Any, str]] = []

    def on_lost(s: Any, permit_id: str) -> None:
        seen.append((s, permit_id))
        fired.set()

    sem = short.permit_expirable_semaphore(name, on_lost=on_lost)
    assert sem.try_set_permits(1)
    permit = sem.acquire()
    assert not sem.lost(permit)
    other.permit_expirable_semaphore(name).release(permit)
    assert fired.wait(10), "on_lost was not called"
    assert seen == [(sem, permit)]
    assert sem.lost(permit)
    with pytest.raises(crosslock.NotHeldError):
        sem.release(permit)
    assert raw.command("GET", name) == "1"


async def test_asyncio_acquired_and_a_cancelled_waiter_takes_nothing(client, other, raw):
    name = "async-permits"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    async with sem.acquired(timeout=5, lease=60) as permit:
        assert list(permits_out(raw, name)) == [permit]
        task = asyncio.create_task(other.permit_expirable_semaphore(name).acquire_async())
        await poll(lambda: raw.numsub(sc_channel(name)) == 1, "the waiter to subscribe")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await poll(lambda: raw.numsub(sc_channel(name)) == 0, "the cancelled waiter to unsubscribe")
    assert raw.command("GET", name) == "1"  # nobody took the permit that came back
    assert permits_out(raw, name) == {}
    with pytest.raises(crosslock.LockTimeoutError):
        async with sem.acquired(timeout=0.2):
            async with sem.acquired(timeout=0.2):
                pytest.fail("two permits out of one")
    assert raw.command("GET", name) == "1"
