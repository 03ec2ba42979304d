"""crosslock.FairLock: waiters are served in the order they asked, each woken on its own channel,
and a waiter that gives up (timeout, cancellation) leaves the queue at once.

The order of arrival is made certain, not timed: each waiter is started only once the one before
it is seen in ``redisson_lock_queue:{name}``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable

import pytest

import crosslock
from support import Raw, channel, poll, wait_until

WAITERS = 5


def queue(name: str) -> str:
    return f"redisson_lock_queue:{{{name}}}"


def timeouts(name: str) -> str:
    return f"redisson_lock_timeout:{{{name}}}"


def waiter_channel(name: str, holder: str) -> str:
    return f"{channel(name)}:{holder}"


def queued(raw: Raw, name: str) -> list[str]:
    return raw.command("LRANGE", queue(name), 0, -1)


def deadlines(raw: Raw, name: str) -> list[str]:
    return raw.command("ZRANGE", timeouts(name), 0, -1)



def test_threads_are_served_in_the_order_they_asked(client, other, raw, redis_server):
    name = "fifo-threads"
    held = other.fair_lock(name)
    assert held.acquire(lease=60)  # only releases hand it over in this test
    lock = client.fair_lock(name)
    order: list[int] = []
    holders: list[str] = []
    errors: list[BaseException] = []

    def waiter(i: int) -> None:
        try:
            holders.append(client.holder())
            assert lock.acquire(timeout=30)
            order.append(i)
            lock.release()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = []
    for i in range(WAITERS):
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        wait_until(lambda: len(queued(raw, name)) == i + 1, what=f"waiter {i} to queue")
    assert queued(raw, name) == holders  # first come, first in line
    assert sorted(deadlines(raw, name)) == sorted(holders)
    for h in holders:  # each waiter listens on its own channel (subscribed right after it queued)
        wait_until(lambda: raw.numsub(waiter_channel(name, h)) == 1, what=f"{h} to listen")
    assert order == []

    # A release wakes the head only: the second waiter's channel gets nothing.
    with redis_server.raw() as sub:
        sub.subscribe(waiter_channel(name, holders[1]))
        with redis_server.raw() as head:
            head.subscribe(waiter_channel(name, holders[0]))
            held.release()
            assert head.next_message(timeout=10) == ["message", waiter_channel(name, holders[0]), "0"]
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        assert order == list(range(WAITERS))
        # Every later release went to the next head's own channel, in order, never to another.
        raw.command("PUBLISH", waiter_channel(name, holders[1]), "marker")
        assert sub.next_message(timeout=10) == ["message", waiter_channel(name, holders[1]), "0"]
        assert sub.next_message(timeout=10) == ["message", waiter_channel(name, holders[1]), "marker"]
    assert raw.command("EXISTS", name, queue(name), timeouts(name)) == 0


async def test_asyncio_tasks_are_served_in_order_past_a_cancelled_one(client, other, raw):
    name = "fifo-tasks"
    held = other.fair_lock(name)
    assert await held.acquire_async(lease=60)
    lock = client.fair_lock(name)
    order: list[int] = []
    holders: dict[int, str] = {}

    async def waiter(i: int) -> None:
        holders[i] = client.holder()
        async with lock:
            order.append(i)

    tasks = []
    for i in range(WAITERS):
        tasks.append(asyncio.create_task(waiter(i)))
        await poll(lambda: len(queued(raw, name)) == i + 1, f"task {i} to queue")
    assert queued(raw, name) == [holders[i] for i in range(WAITERS)]

    tasks[2].cancel()  # gives up in the middle of the line
    with pytest.raises(asyncio.CancelledError):
        await tasks[2]
    await poll(lambda: holders[2] not in queued(raw, name), "the cancelled task to leave the queue")
    assert queued(raw, name) == [holders[i] for i in (0, 1, 3, 4)]
    assert holders[2] not in deadlines(raw, name)
    await poll(lambda: raw.numsub(waiter_channel(name, holders[2])) == 0, "the cancelled task to unsubscribe")

    held.release()
    await asyncio.wait_for(asyncio.gather(*(tasks[i] for i in (0, 1, 3, 4))), 30)
    assert order == [0, 1, 3, 4]
    assert raw.command("EXISTS", name, queue(name), timeouts(name)) == 0


def test_a_timed_out_waiter_leaves_the_queue_and_the_next_is_served(client, other, raw):
    name = "fifo-timeout"
    held = other.fair_lock(name)
    assert held.acquire(lease=60)
    lock = client.fair_lock(name)
    result: dict[str, Any] = {}
    holders: dict[str, str] = {}

    def impatient() -> None:
        holders["impatient"] = client.holder()
        result["impatient"] = bool(lock.acquire(timeout=0.5))

    def patient() -> None:
        holders["patient"] = client.holder()
        result["patient"] = bool(lock.acquire(timeout=30))
        lock.release()

    first = threading.Thread(target=impatient, daemon=True)
    first.start()
    wait_until(lambda: len(queued(raw, name)) == 1, what="the impatient waiter to queue")
    second = threading.Thread(target=patient, daemon=True)
    second.start()
    wait_until(lambda: len(queued(raw, name)) == 2, what="the patient waiter to queue")
    assert queued(raw, name) == [holders["impatient"], holders["patient"]]

    first.join(10)
    assert result["impatient"] is False
    # Gone from the line and from the deadlines at once, ahead of the patient waiter.
    assert queued(raw, name) == [holders["patient"]]
    assert deadlines(raw, name) == [holders["patient"]]
    wait_until(lambda: raw.numsub(waiter_channel(name, holders["impatient"])) == 0, what="its unsubscription")

    held.release()
    second.join(10)
    assert result["patient"] is True
    assert raw.command("EXISTS", name, queue(name), timeouts(name)) == 0


def test_a_free_lock_goes_to_the_head_of_the_queue_and_a_dead_head_is_skipped(client, raw):
    """A free lock is not taken past a live queued waiter (here one that crashed: it is in the
    queue with a deadline ahead, as Redisson's and crosslock's waiters leave it); once that
    deadline passed, the next acquire skips and drops it."""
    name = "fifo-dead-head"
    ghost = "00000000-0000-4000-8000-000000000000:1"
    now_ms = int(time.time() * 1000)
    raw.command("RPUSH", queue(name), ghost)
    raw.command("ZADD", timeouts(name), now_ms + 60_000, ghost)
    lock = client.fair_lock(name)
    assert not lock.acquire(blocking=False)  # the lock is free, but the ghost is first
    assert not lock.acquire(timeout=0.2)
    assert queued(raw, name) == [ghost]  # the tries did not queue behind it for good
    assert deadlines(raw, name) == [ghost]
    assert raw.command("EXISTS", name) == 0

    raw.command("ZADD", timeouts(name), now_ms - 1, ghost)  # its deadline has passed
    assert lock.acquire(blocking=False)
    assert raw.hgetall(name) == {client.holder(): "1"}
    assert raw.command("EXISTS", queue(name), timeouts(name)) == 0
    lock.release()
    assert raw.command("EXISTS", name, queue(name), timeouts(name)) == 0
