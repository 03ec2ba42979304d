"""Identity: each asyncio task is its own holder (not inherited by child tasks), each thread is its
own holder; asyncio cancellation leaves nothing behind."""

from __future__ import annotations

import asyncio
import threading

import pytest

import crosslock
from support import channel, wait_until

EVENT_LOOPS = ("asyncio", "uvloop")  # every test here runs on both (see conftest.py)


async def test_two_tasks_on_one_loop_exclude_each_other(client):
    lock = client.lock("tasks")
    holding, go_on = asyncio.Event(), asyncio.Event()

    async def first():
        async with lock:
            holding.set()
            await go_on.wait()

    async def second():
        await holding.wait()
        assert await lock.acquire_async(blocking=False) is False
        assert not await lock.is_held_async()
        assert await lock.locked_async()
        go_on.set()
        assert await lock.acquire_async(timeout=10) is True
        await lock.release_async()

    await asyncio.wait_for(asyncio.gather(first(), second()), 20)
    assert not await lock.locked_async()


async def test_a_task_reenters_its_own_lock(client, raw):
    lock = client.lock("task-re")
    async with lock:
        async with lock:
            assert await lock.hold_count_async() == 2
            assert raw.hgetall("task-re") == {client.holder(): "2"}
        assert await lock.hold_count_async() == 1
    assert not raw.command("EXISTS", "task-re")


async def test_a_child_task_does_not_inherit_its_parents_hold(client):
    lock = client.lock("parent")
    async with lock:
        parent_holder = client.holder()

        async def child():
            return client.holder(), await lock.acquire_async(blocking=False), await lock.hold_count_async()

        child_holder, acquired, count = await asyncio.create_task(child())
        assert child_holder != parent_holder
        assert acquired is False and count == 0


async def test_sync_methods_inside_a_task_use_the_tasks_identity(client):
    lock = client.lock("mixed")
    assert await lock.acquire_async()
    assert lock.is_held() and lock.hold_count() == 1  # sync call, same task

    async def other_task():
        return lock.is_held()

    assert await asyncio.create_task(other_task()) is False
    lock.release()  # sync release of the task's hold
    assert not lock.locked()


async def test_a_task_and_a_thread_are_different_holders(client):
    lock = client.lock("task-vs-thread")
    async with lock:
        seen = {}

        def in_thread():
            seen["holder"] = client.holder()
            seen["try"] = bool(lock.acquire(blocking=False))

        t = threading.Thread(target=in_thread)
        t.start()
        t.join(10)
        assert seen["try"] is False and seen["holder"] != client.holder()


async def test_eight_tasks_exclude_each_other_on_a_non_atomic_counter(client, redis_server, raw):
    lock = client.lock("task-counter-lock")
    rounds, tasks = 15, 8

    async def worker(r):
        for _ in range(rounds):
            async with lock:
                value = int(r.command("GET", "task-counter") or 0)
                await asyncio.sleep(0.001)  # let every other task run inside the critical section
                r.command("SET", "task-counter", value + 1)

    conns = [redis_server.raw() for _ in range(tasks)]
    try:
        await asyncio.wait_for(asyncio.gather(*(worker(r) for r in conns)), 60)
    finally:
        for r in conns:
            r.close()
    assert int(raw.command("GET", "task-counter")) == rounds * tasks


async def test_cancelling_a_waiting_acquire_leaves_nothing(client, url, raw):
    name = "cancel-me"
    holder = crosslock.connect(url)
    try:
        assert await holder.lock(name).acquire_async(lease=60)
        lock = client.lock(name)
        waiting = asyncio.create_task(lock.acquire_async())
        await asyncio.sleep(0)
        await asyncio.to_thread(wait_until, lambda: raw.numsub(channel(name)) == 1, what="the waiter")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # core finishes its give-up cleanup right after the asyncio future is cancelled
        await asyncio.to_thread(wait_until, lambda: raw.numsub(channel(name)) == 0, what="unsubscribe")
        await asyncio.to_thread(wait_until, lambda: client._native.subscribed_channels() == 0)
        assert raw.hgetall(name) == {holder.holder(): "1"}
        holder.lock(name).release()
        # The cancelled waiter must not take the lock later: a third client gets it at once.
        with crosslock.connect(url) as third:
            assert third.lock(name).acquire(blocking=False)
            assert raw.hgetall(name) == {third.holder(): "1"}
            third.lock(name).release()
    finally:
        holder.close()


async def test_wait_for_timeout_cancels_cleanly(client, url, raw):
    with crosslock.connect(url) as holder:
        assert await holder.lock("wf").acquire_async(lease=60)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.lock("wf").acquire_async(), 0.3)
        await asyncio.to_thread(wait_until, lambda: raw.numsub(channel("wf")) == 0, what="unsubscribe")
        assert raw.hgetall("wf") == {holder.holder(): "1"}


async def test_async_wait_limits_and_acquired(client):
    lock = client.lock("async-busy")
    other = asyncio.Event()
    done = asyncio.Event()

    async def hold():
        async with lock:
            other.set()
            await done.wait()

    task = asyncio.create_task(hold())
    await other.wait()
    try:
        assert await lock.acquire_async(timeout=0.2) is False
        with pytest.raises(crosslock.LockTimeoutError) as info:
            async with lock.acquired(timeout=0.1):
                pass
        assert info.value.lock_name == "async-busy"
    finally:
        done.set()
        await task
    async with lock.acquired(timeout=5, lease=10):
        assert 9 < await lock.remaining_lease_async() <= 10
    assert await lock.remaining_lease_async() is None


async def test_async_client_lifecycle_and_queries(url, raw):
    async with await crosslock.connect_async(url) as client:
        lock = client.lock("async-life")
        assert await lock.acquire_async(lease=30)
        assert await lock.is_held_async() and await lock.hold_count_async() == 1
        assert await lock.force_unlock_async() is True
        assert not await lock.locked_async()
    assert client.closed
    with pytest.raises(crosslock.RedisUnavailableError):
        await lock.acquire_async()


async def test_lost_lock_of_a_task(url, raw):
    fired = threading.Event()
    async with await crosslock.connect_async(url, watchdog_timeout=0.6) as client:
        lock = client.lock("task-lost", on_lost=lambda _: fired.set())
        with pytest.raises(crosslock.LockLostError):
            async with lock:
                raw.command("DEL", "task-lost")
                assert await asyncio.to_thread(fired.wait, 10)
                assert lock.lost
        assert lock.lost  # this task's hold was the one lost


def test_two_event_loops_in_two_threads(client, run):
    lock = client.lock("two-loops")
    results = []

    def in_thread():
        async def body():
            async with lock:
                results.append(client.holder())
                await asyncio.sleep(0.05)

        run(body())

    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(results) == 2 and results[0] != results[1]


def test_event_loops_that_come_and_go_leave_no_descriptor_behind(url, run):
    """Each event loop gets its own completion queue (a socket pair it watches): it goes with the
    loop, so a program calling asyncio.run() over and over does not leak descriptors."""
    import gc
    import os

    with crosslock.connect(url) as client:
        lock = client.lock("loops-come-and-go")

        async def once():
            async with lock:
                assert await lock.is_held_async()

        def open_fds() -> int:
            gc.collect()
            return len(os.listdir("/proc/self/fd"))

        run(once())
        before = open_fds()
        for _ in range(100):
            run(once())
        assert open_fds() <= before, "loops run one after another left descriptors open"
