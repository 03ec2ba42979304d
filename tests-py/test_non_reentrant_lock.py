"""crosslock.NonReentrantLock: a second acquire by its holder raises NonReentrantError at once,
naming the lock and changing nothing; other holders wait and are excluded as for any lock."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import crosslock
from support import channel, wait_until


def test_the_holder_asking_again_gets_a_clear_error_and_keeps_its_hold(client, raw):
    name = "payments:7"
    lock = client.non_reentrant_lock(name)
    holder = client.holder()
    with lock:
        before = (raw.hgetall(name), raw.command("PTTL", name))
        with pytest.raises(crosslock.NonReentrantError) as info:
            with lock:
                pytest.fail("re-entered a non-reentrant lock")
        err = info.value
        assert isinstance(err, RuntimeError) and isinstance(err, crosslock.CrosslockError)
        assert err.code == "NON_REENTRANT" and err.lock_name == name and err.holder == holder
        assert name in str(err) and "release it first" in str(err)
        after = (raw.hgetall(name), raw.command("PTTL", name))
        assert after[0] == before[0] == {holder: "1"}  # Redis unchanged: still held once
        assert after[1] > 0
        assert lock.is_held() and lock.hold_count() == 1
    assert raw.command("EXISTS", name) == 0
    assert lock.acquire(blocking=False)  # once released, the same thread may take it again
    lock.release()


def test_another_thread_waits_and_is_woken_by_the_release(client, raw):
    name = "nr-handoff"
    lock = client.non_reentrant_lock(name)
    assert lock.acquire(lease=60)  # only the release can let the waiter in
    result: dict[str, Any] = {}

    def waiter() -> None:
        result["acquired"] = bool(lock.acquire(timeout=30))
        result["holder"] = client.holder()
        result["layout"] = raw.hgetall(name)
        lock.release()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(channel(name)) == 1, what="the other thread to wait")
    assert "acquired" not in result  # another thread is another holder: no NonReentrantError
    lock.release()
    t.join(10)
    assert result["acquired"] is True
    assert result["layout"] == {result["holder"]: "1"}
    assert raw.command("EXISTS", name) == 0


def test_it_excludes_a_lock_of_the_same_name_both_ways(client, url):
    name = "nr-shared"
    with crosslock.connect(url) as other:
        with client.non_reentrant_lock(name):
            assert not other.lock(name).acquire(blocking=False)
        plain = other.lock(name)
        assert plain.acquire()
        assert not client.non_reentrant_lock(name).acquire(timeout=0.2)
        plain.release()


async def test_an_asyncio_task_asking_again_gets_the_error(client, raw):
    name = "nr-async"
    lock = client.non_reentrant_lock(name)
    async with lock:
        me = asyncio.current_task()
        assert me is not None
        timer = asyncio.get_running_loop().call_later(20, me.cancel)  # a hang fails, not blocks
        try:
            with pytest.raises(crosslock.NonReentrantError) as info:
                await lock.acquire_async()
        finally:
            timer.cancel()
        assert info.value.lock_name == name
        assert await lock.hold_count_async() == 1
        # Another task is another holder: it waits (here: one try) instead of raising.
        async def another_task_tries() -> bool:
            return await lock.acquire_async(blocking=False)

        assert await asyncio.create_task(another_task_tries()) is False
    assert raw.command("EXISTS", name) == 0
