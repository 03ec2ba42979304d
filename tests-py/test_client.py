"""crosslock.Client: its identity, and what close (and a client never closed) does to its
connections, its holds and the calls still waiting."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

import crosslock
from support import channel, hold_in_thread, wait_until


def test_client_id_is_a_uuid4(client):
    import uuid

    assert uuid.UUID(client.id).version == 4
    assert client.id == client.id.lower()


def test_close_releases_held_locks_and_fails_later_calls(url, raw):
    c = crosslock.connect(url)
    lock = c.lock("closing")
    assert lock.acquire()
    assert repr(c).endswith("open>") and c.address.startswith("127.0.0.1:")
    c.close()
    c.close()  # idempotent
    assert c.closed and repr(c).endswith("closed>")
    assert raw.command("EXISTS", "closing") == 0
    with pytest.raises(crosslock.RedisUnavailableError) as info:
        lock.acquire()
    assert "closed" in str(info.value)


def test_close_closes_every_connection_while_the_client_lives(url, raw):
    """close() closes the client's connections (its own, its threads' lanes and its event loops'),
    not only once the client object is collected."""

    before = set(raw.clients())
    c = crosslock.connect(url)
    lock = c.lock("closing-connections")
    for _ in range(200):  # in quick succession: this thread gets a lane
        assert lock.acquire(timeout=5)
        lock.release()

    async def main() -> None:
        for _ in range(200):  # and so does this event loop
            assert await lock.acquire_async(timeout=5)
            await lock.release_async()
        ours = set(raw.clients()) - before
        assert len(ours) >= 3, ours  # the command connection and the two lanes, at least
        await c.aclose()
        # The loop's lane is closed on the loop: wait without blocking it.
        deadline = time.monotonic() + 10
        while set(raw.clients()) & ours:
            assert time.monotonic() < deadline, f"still open after close(): {set(raw.clients()) & ours}"
            await asyncio.sleep(0.02)

    asyncio.run(main())
    assert c.closed and raw.command("EXISTS", "closing-connections") == 0


def test_a_client_collected_without_close_closes_its_connections_and_its_locks_expire(url, raw):
    """A client dropped without closing (nothing refers to it, nor to its locks) closes its
    connections and stops renewing: a lock it still held expires after its lease, as documented."""

    before = set(raw.clients())

    def use() -> set[str]:
        c = crosslock.connect(url, watchdog_timeout=0.6)
        pairs = c.lock("collected-client:pairs")
        for _ in range(200):  # in quick succession: this thread gets a lane
            assert pairs.acquire(timeout=5)
            pairs.release()
        assert c.lock("collected-client").acquire()
        return set(raw.clients()) - before

    ours = use()
    assert len(ours) >= 2, ours  # the command connection and the lane, at least
    gc.collect()
    wait_until(lambda: not set(raw.clients()) & ours, timeout=10, what="the dropped client's connections to close")
    wait_until(lambda: raw.command("EXISTS", "collected-client") == 0, timeout=5, what="its lock to expire")


def test_an_aclose_cancelled_at_once_still_releases_every_lock(url, raw):
    """A shutdown that gives ``aclose()`` a moment and moves on (``asyncio.wait_for``, a cancelled
    task) must not leave the locks it had not released yet to their leases (30 s, renewal having
    stopped): the client is closed, and its locks released, all the same."""
    c = crosslock.connect(url)
    locks = [c.lock(f"aclose-cancelled:{i}") for i in range(1000)]

    async def main() -> None:
        for lock in locks:  # by this task (a task per acquire would end holding: see test_mistakes)
            assert await lock.acquire_async()
        closing = asyncio.ensure_future(c.aclose())
        await asyncio.sleep(0)  # it begins
        assert not closing.done(), "aclose() ended at once: the test needs to cancel it half-way"
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing

    asyncio.run(main())
    assert c.closed
    wait_until(lambda: not raw.command("KEYS", "aclose-cancelled:*"), what="every lock released")


def test_client_context_manager_closes(url, raw):
    with crosslock.connect(url) as c:
        assert c.lock("ctx").acquire()
    assert c.closed
    assert raw.command("EXISTS", "ctx") == 0


def test_close_wakes_a_pending_acquire(url, client, raw):
    _, release, t = hold_in_thread(client.lock("pending"), lease=60)
    c = crosslock.connect(url)
    lock = c.lock("pending")
    outcome = {}

    def waiter():
        try:
            outcome["result"] = bool(lock.acquire())
        except crosslock.CrosslockError as e:
            outcome["error"] = e

    w = threading.Thread(target=waiter)
    w.start()
    wait_until(lambda: raw.numsub(channel("pending")) == 1, what="the waiter to subscribe")
    c.close()
    w.join(10)
    release.set()
    t.join(10)
    assert isinstance(outcome.get("error"), crosslock.RedisUnavailableError), outcome
    assert outcome["error"].lock_name == "pending"
