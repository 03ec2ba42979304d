"""crosslock.GroupLock (Redisson's getMultiLock(group, values)): many values of one group taken
all or none, overlapping sets excluding each other across threads and asyncio tasks, re-entry,
extend, the lost signal, and clear errors for bad values."""

from __future__ import annotations

import asyncio
import threading

import pytest

import crosslock
from support import wait_until


def test_a_set_is_taken_whole_and_released_whole(client, raw):
    lock = client.group_lock("orders", ["42", "43"])
    assert lock.name == "orders" and len(lock.fields) == 2
    holder = client.holder()
    with lock:
        fields = raw.hgetall("orders")
        assert len(fields) == 6
        assert all(fields[f] == holder and fields[f"{f}:{holder}:lock_count"] == "1" for f in lock.fields)
        assert lock.is_held() and lock.hold_count() == 1 and lock.locked()
        assert lock.holders() == [holder]
    assert raw.command("EXISTS", "orders") == 0


def test_overlapping_sets_exclude_across_threads_and_disjoint_ones_do_not(client):
    lock = client.group_lock("g", ["a", "b"])
    with lock:
        seen: dict[str, bool] = {}

        def other() -> None:
            seen["overlap"] = bool(client.group_lock("g", ["b", "c"]).acquire(blocking=False))
            disjoint = client.group_lock("g", ["c", "d"])
            seen["disjoint"] = bool(disjoint.acquire(blocking=False))
            if seen["disjoint"]:
                disjoint.release()

        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert seen == {"overlap": False, "disjoint": True}


def test_reentry_counts_and_a_release_wakes_a_waiting_thread(client, raw):
    lock = client.group_lock("re", ["x"])
    assert lock.acquire() and lock.acquire()
    assert lock.hold_count() == 2
    got: dict[str, bool] = {}

    def waiter() -> None:
        other = client.group_lock("re", ["x", "y"])
        got["acquired"] = bool(other.acquire(timeout=20))
        if got["acquired"]:
            other.release()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub("redisson_lock__channel:{re}") >= 1, what="the waiter to subscribe")
    lock.release()
    assert lock.hold_count() == 1 and t.is_alive()
    lock.release()
    t.join(20)
    assert got == {"acquired": True}


async def test_asyncio_tasks_are_holders_of_their_own(client):
    lock = client.group_lock("tasks", ["1", "2"])
    async with lock:
        assert await lock.hold_count_async() == 1

        async def another() -> bool:
            return bool(await client.group_lock("tasks", ["2"]).acquire_async(blocking=False))

        assert await asyncio.create_task(another()) is False
    assert not await lock.locked_async()


def test_extend_and_lost(fast_client, raw):
    lost = threading.Event()
    lock = fast_client.group_lock("ext", ["m", "n"], on_lost=lambda _: lost.set())
    with lock:
        lock.extend(60.0)
        assert lock.remaining_lease() > 55
        assert raw.command("PTTL", "ext") > 55_000
    with pytest.raises(crosslock.LockLostError):
        with lock:
            assert fast_client.group_lock("ext", ["n"]).force_unlock()
            assert lost.wait(10), "on_lost was not called"
            assert lock.lost


def test_bad_values_are_refused_clearly(client, raw):
    with pytest.raises(crosslock.InvalidArgumentError, match="at least one value"):
        client.group_lock("g", [])
    with pytest.raises(crosslock.InvalidArgumentError, match='"a" is given twice'):
        client.group_lock("g", ["a", "b", "a"])
    with pytest.raises(crosslock.InvalidArgumentError, match="kryo5"):
        client.group_lock("g", ["a"], codec="json")
    with pytest.raises(TypeError, match=r"write \['abc'\]"):
        client.group_lock("g", "abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be strings"):
        client.group_lock("g", ["a", 7])  # type: ignore[list-item]
    with client.lock("taken"):
        before = raw.hgetall("taken")
        with pytest.raises(crosslock.WrongTypeError, match="another kind"):
            client.group_lock("taken", ["a"]).acquire(blocking=False)
        assert raw.hgetall("taken") == before
