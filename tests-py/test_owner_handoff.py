"""crosslock.Owner: a hold taken in one thread or asyncio task and released in another, inside
``with owner:`` in both (Redisson's lock(threadId)/unlock(threadId), Node's { owner })."""

from __future__ import annotations

import asyncio
import threading

import pytest

import crosslock


def in_thread(fn):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # reported below
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_hold_taken_in_one_thread_is_released_in_another(client, raw):
    lock = client.lock("handoff:threads")
    owner = crosslock.Owner()

    def take() -> bool:
        with owner:
            return bool(lock.acquire() and lock.acquire())  # re-entry as the owner

    assert in_thread(take) is True
    assert raw.hgetall("handoff:threads") == {f"{client.id}:{owner.number}": "2"}
    # Another thread without the owner is not the holder, and cannot release it.
    with pytest.raises(crosslock.NotHeldError):
        in_thread(lock.release)
    assert in_thread(lock.is_held) is False

    def finish() -> tuple:
        with owner:
            held, count = lock.is_held(), lock.hold_count()
            lock.release()
            lock.release()
            return held, count

    assert in_thread(finish) == (True, 2)
    assert raw.command("EXISTS", "handoff:threads") == 0


async def test_a_hold_taken_in_one_task_is_released_in_another(client, raw):
    lock = client.lock("handoff:tasks")
    owner = crosslock.Owner()

    async def take() -> None:
        with owner:
            assert await lock.acquire_async()

    async def stranger() -> bool:
        return await lock.is_held_async()

    async def finish() -> None:
        with owner:
            await lock.release_async()

    await asyncio.create_task(take())
    assert raw.hgetall("handoff:tasks") == {f"{client.id}:{owner.number}": "1"}
    assert await asyncio.create_task(stranger()) is False
    await asyncio.create_task(finish())
    assert raw.command("EXISTS", "handoff:tasks") == 0


def test_owner_scopes_nest_and_end_with_their_block(client):
    lock = client.lock("handoff:nest")
    outer, inner = crosslock.Owner(), crosslock.Owner()
    assert outer.number != inner.number
    with outer:
        assert lock.acquire()
        with inner:
            assert not lock.acquire(blocking=False)  # another holder: excluded
        assert lock.is_held()
        lock.release()
    assert not lock.locked()
    assert repr(outer) == f"<crosslock.Owner {outer.number}>"
