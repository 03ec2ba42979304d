"""crosslock.Semaphore: never more permits out than set (checked by a counter in Redis that
crosslock never touches), waiters woken by releases, wait limits, cancellation that takes nothing,
and the permit-count operations, against a real redis-server."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Iterator

import pytest

import crosslock
from support import poll, wait_until

PERMITS = 3
ROUNDS = 10


def sc_channel(name: str) -> str:
    return f"redisson_sc:{{{name}}}"


def test_eight_threads_never_hold_more_permits_than_set(client, other, redis_server, raw):
    name = "render-slots"
    assert client.semaphore(name).try_set_permits(PERMITS)
    sems = [client.semaphore(name), other.semaphore(name)]
    inside_counts: list[int] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        sem = sems[i % 2]
        try:
            with redis_server.raw() as r:
                for _ in range(ROUNDS):
                    assert sem.acquire(timeout=30)
                    try:
                        inside_counts.append(r.command("INCR", "inside"))  # the independent detector
                        time.sleep(0.002)
                        r.command("DECR", "inside")
                    finally:
                        sem.release()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(inside_counts) == 8 * ROUNDS
    assert max(inside_counts) <= PERMITS, f"{max(inside_counts)} holders of {PERMITS} permits at once"
    assert raw.command("GET", name) == str(PERMITS)  # every permit came back
    assert client.semaphore(name).available_permits() == PERMITS


async def test_eight_asyncio_tasks_never_hold_more_permits_than_set(client, redis_server, raw):
    name = "async-slots"
    sem = client.semaphore(name)
    assert await sem.try_set_permits_async(PERMITS)
    inside_counts: list[int] = []

    async def worker() -> None:
        with redis_server.raw() as r:
            for _ in range(ROUNDS):
                async with sem:
                    inside_counts.append(r.command("INCR", "inside"))
                    await asyncio.sleep(0.002)  # every other task runs meanwhile
                    r.command("DECR", "inside")

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(8))), 60)
    assert len(inside_counts) == 8 * ROUNDS
    assert max(inside_counts) <= PERMITS, f"{max(inside_counts)} holders of {PERMITS} permits at once"
    assert await sem.available_permits_async() == PERMITS


def test_event_loops_on_several_threads_share_one_semaphore(client, redis_server):
    """One client and semaphore used by asyncio loops on three threads: a release on one loop's
    thread hands the local queue's turn to a task of another loop, whose loop must wake for it."""
    sem = client.semaphore("loops-on-threads")
    assert sem.try_set_permits(1)
    rounds = 150
    done: dict[int, int] = {}
    errors: list[BaseException] = []

    def loop_thread(i: int) -> None:
        async def work() -> int:
            with redis_server.raw() as r:
                for n in range(rounds):
                    async with sem:
                        assert r.command("INCR", "loops-inside") == 1  # one permit: one holder
                        await asyncio.sleep(0)  # the other loops' tasks queue up meanwhile
                        r.command("DECR", "loops-inside")
            return rounds

        try:
            done[i] = asyncio.run(work())
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=loop_thread, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not errors, errors
    stuck = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not stuck, f"loops {stuck} never woke for their turn (done: {done})"
    assert done == {0: rounds, 1: rounds, 2: rounds}
    assert sem.available_permits() == 1


def test_every_permit_can_be_out_at_once_and_no_more(client, other):
    name = "all-out"
    sem = client.semaphore(name)
    assert sem.try_set_permits(PERMITS)
    together = threading.Barrier(PERMITS + 1, timeout=20)  # opens only with all permits out
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            assert sem.acquire(timeout=10)
            together.wait()  # all holding
            together.wait()  # the main thread has checked
            sem.release()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=holder) for _ in range(PERMITS)]
    for t in threads:
        t.start()
    together.wait()
    assert not other.semaphore(name).acquire(blocking=False)
    assert sem.available_permits() == 0
    together.wait()
    for t in threads:
        t.join(10)
    assert not errors, errors
    assert sem.available_permits() == PERMITS


def test_a_blocked_waiter_is_woken_by_a_release(client, other, raw, redis_server):
    name = "handoff"
    sem = client.semaphore(name)
    assert sem.try_set_permits(1)
    assert sem.acquire()
    result: dict[str, Any] = {}

    def waiter() -> None:
        # Its wait limit is far beyond the test's: only a release can make it return True.
        result["acquired"] = bool(other.semaphore(name).acquire(timeout=600))

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(sc_channel(name)) == 1, what="the waiter to subscribe")
    assert "acquired" not in result
    with redis_server.raw() as sub:
        sub.subscribe(sc_channel(name))
        sem.release()
        assert sub.next_message(timeout=10) == ["message", sc_channel(name), "1"]  # permits available
    t.join(10)
    assert not t.is_alive() and result["acquired"] is True
    assert sem.available_permits() == 0
    other.semaphore(name).release()
    wait_until(lambda: raw.numsub(sc_channel(name)) == 0, what="the waiter to unsubscribe")


def test_a_waiter_for_several_permits_gets_them_once_enough_came_back(client, other, raw):
    name = "several"
    sem = client.semaphore(name)
    assert sem.try_set_permits(2)
    assert sem.acquire(2)
    result: dict[str, Any] = {}

    def waiter() -> None:
        result["acquired"] = bool(other.semaphore(name).acquire(2, timeout=600))

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(sc_channel(name)) == 1, what="the waiter to subscribe")
    sem.release()
    # One permit is not enough: the waiter goes on waiting and takes nothing piecemeal.
    assert "acquired" not in result
    assert raw.command("GET", name) == "1"
    sem.release()
    t.join(10)
    assert result["acquired"] is True
    assert sem.available_permits() == 0
    sem.release(2)
    assert sem.available_permits() == 2


def test_wait_limits(client, other, raw):
    name = "limits"
    sem = client.semaphore(name)
    assert sem.available_permits() == 0  # an unset semaphore has none
    assert not sem.acquire(blocking=False)
    assert sem.try_set_permits(1)
    held = other.semaphore(name)
    assert held.acquire(timeout=0)
    started = time.monotonic()
    assert not sem.acquire(timeout=0.3)
    assert time.monotonic() - started >= 0.25  # it did wait
    assert not sem.acquire(blocking=False)
    held.release()
    assert not sem.acquire(2, timeout=0.2)  # one of two available: takes none
    assert raw.command("GET", name) == "1"
    assert sem.acquire(1, timeout=5)
    sem.release()
    wait_until(lambda: raw.numsub(sc_channel(name)) == 0, what="the timed-out waits to unsubscribe")


async def test_a_cancelled_waiter_takes_nothing_and_leaves_no_subscription(client, other, raw):
    name = "cancelled"
    sem = client.semaphore(name)
    assert await sem.try_set_permits_async(1)
    assert await sem.acquire_async()
    task = asyncio.create_task(other.semaphore(name).acquire_async())
    await poll(lambda: raw.numsub(sc_channel(name)) == 1, "the waiter to subscribe")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await poll(lambda: raw.numsub(sc_channel(name)) == 0, "the cancelled waiter to unsubscribe")
    assert raw.command("PUBSUB", "CHANNELS", "*") == []
    await sem.release_async()
    assert raw.command("GET", name) == "1"  # nobody took the permit that came back
    assert await other.semaphore(name).acquire_async(blocking=False) is True
    await other.semaphore(name).release_async()
    assert await sem.available_permits_async() == 1


def test_permit_count_operations_and_layout(client, raw):
    name = "counts"
    sem = client.semaphore(name)
    assert sem.available_permits() == 0
    assert sem.try_set_permits(3) is True
    assert sem.try_set_permits(5) is False  # already set: unchanged
    assert raw.command("GET", name) == "3" and sem.available_permits() == 3
    assert raw.command("PTTL", name) == -1  # permits never expire
    assert sem.add_permits(2) == 5
    assert sem.add_permits(-1) == 4
    assert raw.command("GET", name) == "4"
    assert sem.acquire(3)
    assert sem.available_permits() == 1
    assert sem.drain_permits() == 1
    assert sem.drain_permits() == 0
    assert sem.available_permits() == 0 and raw.command("GET", name) == "0"
    sem.release(3)  # anyone may release, and permits have no owner
    assert sem.available_permits() == 3
    assert sem.delete() is True and sem.delete() is False
    assert raw.command("KEYS", "*") == []
    with pytest.raises(crosslock.InvalidArgumentError):
        sem.release(0)
    with pytest.raises(crosslock.InvalidArgumentTypeError):
        sem.acquire("1")  # type: ignore[arg-type]


def test_release_if_exists_releases_only_into_an_existing_semaphore(client, other, raw):
    name = "if-exists"
    sem = client.semaphore(name)
    assert sem.release_if_exists(2) is False
    assert raw.command("EXISTS", name) == 0  # not created
    with pytest.raises(crosslock.InvalidArgumentError):
        sem.release_if_exists(0)
    with pytest.raises(crosslock.InvalidArgumentTypeError):
        sem.release_if_exists("1")  # type: ignore[arg-type]
    assert sem.try_set_permits(0)
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(other.semaphore(name).acquire(2, timeout=30)))
    waiter.start()
    wait_until(lambda: raw.numsub(sc_channel(name)) == 1, what="the waiter to subscribe")
    assert sem.release_if_exists(3) is True
    waiter.join(30)
    assert results == [True]  # woken by it
    assert raw.command("GET", name) == "1"


async def test_release_if_exists_async(client, raw):
    sem = client.semaphore("if-exists-async")
    assert await sem.release_if_exists_async() is False
    assert raw.command("KEYS", "*") == []
    assert await sem.try_set_permits_async(1)
    assert await sem.release_if_exists_async(2) is True
    assert await sem.available_permits_async() == 3
