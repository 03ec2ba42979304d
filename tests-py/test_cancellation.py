"""asyncio cancellation at the awkward moments: it never leaves a hold nobody knows about, never
takes away a hold the caller still has, and never half-releases.

* An ``acquire_async`` cancelled just as it succeeds (the acquire completed on Redis, but the
  caller gets ``CancelledError``) gives that one hold back, at each point where the result can be
  lost on its way to the task: cancelled before it was produced (the bridge drops it
  unconverted) and while it waits for the event loop. Once set, the result reaches the task in
  the same turn of the loop, before any cancel can land.
* A cancelled nested ``acquire_async`` gives back only the hold it won, never the outer one.
* A cancelled ``release_async`` still releases (Redis and the client's bookkeeping agree).

The races are made deterministic rather than timed: Redis writes are held up with
``CLIENT PAUSE … WRITE`` until the client's script is seen waiting in Redis (``blocked_clients``),
and the event loop is kept busy (plain blocking calls in the test coroutine) while the native
side finishes, exactly as a busy loop would in production.
"""

from __future__ import annotations

import asyncio
import gc
import select
import time
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

import pytest

import crosslock
from crosslock._identity import current_owner
from support import Raw, RedisServer, channel, loops_only, poll, wait_until

PAUSE_MS = 10_000  # a safety net only: every test lifts the pause itself

# Every test runs on asyncio's loop and on uvloop (see conftest.py), but those that must see a
# result wait in the loop's selector (`result_queued`), which only asyncio's own loop shows.
EVENT_LOOPS = ("asyncio", "uvloop")
SELECTOR_LOOP_ONLY = loops_only("asyncio")


def blocked_clients(raw: Raw) -> int:
    """How many clients wait in Redis for their command to run (here: held up by CLIENT PAUSE)."""
    for line in raw.command("INFO", "clients").splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":", 1)[1])
    raise AssertionError("INFO clients has no blocked_clients line")


def a_script_is_held_up(raw: Raw) -> bool:
    return blocked_clients(raw) >= 1


@contextmanager
def writes_paused(raw: Raw) -> Iterator[None]:
    """Holds every write (scripts included) until the block ends; reads still run."""
    assert raw.command("CLIENT", "PAUSE", PAUSE_MS, "WRITE") == "OK"
    try:
        yield
    finally:
        raw.command("CLIENT", "UNPAUSE")


class HashWrites:
    """Keyspace notifications for one key's hash writes (HINCRBY, HSET, HDEL): one per change of a
    hold count that does not delete the lock."""

    def __init__(self, server: RedisServer, raw: Raw, key: str) -> None:
        assert raw.command("CONFIG", "SET", "notify-keyspace-events", "Kh") == "OK"
        self.sub = server.raw()
        self.sub.subscribe(f"__keyspace@0__:{key}")
        self.seen: list[str] = []

    def wait_for(self, count: int, timeout: float = 10.0) -> list[str]:
        """Blocks until ``count`` hash writes were seen in all; returns their names."""
        deadline = time.monotonic() + timeout
        while len(self.seen) < count:
            left = deadline - time.monotonic()
            message = self.sub.next_message(timeout=max(left, 0.001)) if left > 0 else None
            if message is None:
                raise AssertionError(f"saw only the hash writes {self.seen}, expected {count}")
            self.seen.append(message[2])
        return self.seen

    def close(self) -> None:
        self.sub.close()


@contextmanager
def hash_writes(server: RedisServer, raw: Raw, key: str) -> Iterator[HashWrites]:
    writes = HashWrites(server, raw, key)
    try:
        yield writes
    finally:
        writes.close()


def result_queued(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether a native result waits for the event loop: a socket crosslock registered with
    ``loop.add_reader`` is readable, either the completion queue's (a result from crosslock's
    runtime) or the loop's lane (the reply of a call made on the loop's own connection). Reads the
    selector loop's private reader map: the only way to see that moment, which these tests must hit
    exactly."""
    selector = getattr(loop, "_selector", None)
    if selector is None:
        pytest.fail(f"{type(loop).__name__} has no selector to look at")
    readers = {
        key.fd: type(getattr(key.data[0], "_callback", None)).__name__
        for key in selector.get_map().values()
        if key.data[0] is not None
    }
    wakers = [fd for fd, kind in readers.items() if kind in ("_Completions", "_LaneReader")]
    assert "_Completions" in readers.values(), "no crosslock completion queue is registered with the loop"
    return bool(select.select(wakers, [], [], 0)[0])


async def acquire_with_result_queued(
    lock: crosslock.Lock, loop: asyncio.AbstractEventLoop, raw: Raw
) -> tuple[asyncio.Task[bool], int]:
    """Starts ``lock.acquire_async()`` in a task of its own and returns that task (and the owner it
    acquires for) once the acquire completed and its result waits for the event loop (see
    :func:`result_queued`).

    The acquire may also complete within its first poll, before the call returns: its reply came
    over the runtime's connection before that poll was over (the loop's thread slowed by one-time
    set-up on a process's first call, or preempted on a busy machine). The task then finishes in
    its first step and the moment these tests need never comes. So Redis holds back writes for a
    moment (a ``CLIENT PAUSE`` that lifts itself) while the first poll runs: its reply cannot come
    within it. Should the acquire still finish there, that hold is released and the acquire tried
    again."""
    for _ in range(20):
        assert raw.command("CLIENT", "PAUSE", 50, "WRITE") == "OK"
        owners: list[int] = []

        async def acquire() -> bool:
            owners.append(current_owner())
            return await lock.acquire_async()

        task = asyncio.ensure_future(acquire())
        await asyncio.sleep(0)  # the task starts the native acquire and awaits it
        if not task.done():
            wait_until(lambda: result_queued(loop), what="the acquire's result to be queued for the loop")
            return task, owners[0]
        assert task.result() is True
        await lock._native.release_async(owners[0])
    pytest.fail("every acquire completed within its first poll: the moment under test never came")


async def cancelled_when(awaitable: Awaitable[Any], condition: Callable[[], Any], what: str) -> None:
    """Awaits ``awaitable`` in the calling task and cancels that task as soon as ``condition``
    holds (like ``asyncio.timeout`` firing at that moment); returns once the cancellation
    surfaced, with the task able to go on."""
    me = asyncio.current_task()
    assert me is not None

    async def cancel_me() -> None:
        await poll(condition, what)
        me.cancel()

    canceller = asyncio.ensure_future(cancel_me())
    try:
        await awaitable
    except asyncio.CancelledError:
        uncancel = getattr(me, "uncancel", None)  # Python ≥ 3.11 counts cancellations
        if uncancel is not None:
            uncancel()
    else:
        pytest.fail(f"{awaitable!r} completed although it should have been cancelled")
    finally:
        if not canceller.done():
            canceller.cancel()
    assert not canceller.cancelled()
    canceller.result()  # re-raises a poll timeout


async def released(client: crosslock.Client, raw: Raw, name: str) -> None:
    """Waits until the lock is gone from Redis and the client watches nothing any more."""
    await poll(lambda: not raw.command("EXISTS", name), f"lock {name!r} to be released in Redis")
    await poll(lambda: client._native.watched_locks() == 0, "the watchdog to forget the lock")


def others_cannot_take(url: str, name: str) -> None:
    with crosslock.connect(url) as other:
        assert not other.lock(name).acquire(blocking=False)


def others_can_take(url: str, name: str) -> None:
    with crosslock.connect(url) as other:
        lock = other.lock(name)
        assert lock.acquire(blocking=False)
        lock.release()


# -- #4: an acquire_async cancelled just as it succeeds ----------------------------------------


async def test_cancel_while_the_script_waits_in_redis_gives_the_hold_back_without_the_loop(client, raw, redis_server, url):
    """The asyncio future is cancelled while the acquire's script waits in Redis, and the event
    loop stays busy from then on: the future's ``cancel()`` drops the native acquire at once (it
    needs no turn of the loop), the script still wins once Redis runs it, and that hold is given
    back in the background, all while the loop is blocked."""
    name = "race-unconverted"
    lock = client.lock(name)
    with redis_server.raw() as sub:
        sub.subscribe(channel(name))
        with writes_paused(raw):
            task = asyncio.ensure_future(lock.acquire_async())
            await asyncio.sleep(0)  # the task starts the native acquire and awaits it
            wait_until(lambda: a_script_is_held_up(raw), what="the acquire script to wait in Redis")
            task.cancel()
        # Still without yielding to the loop: the acquire wins in Redis and is given back (the
        # release publishes the unlock message).
        message = sub.next_message(timeout=10)
        assert message is not None, "the hold won by the cancelled acquire was never given back"
        assert message[:2] == ["message", channel(name)]
        assert not raw.hgetall(name)
        with pytest.raises(asyncio.CancelledError):
            await task
    await released(client, raw, name)
    others_can_take(url, name)


@SELECTOR_LOOP_ONLY
async def test_cancel_while_the_result_waits_in_the_event_loop_gives_the_hold_back(client, raw, url):
    """The acquire completed and its result waits for the event loop (in the completion queue, or
    as the reply in the loop's lane socket; the loop was busy, as in a ``time.sleep`` inside a
    coroutine) when the task is cancelled: the waiting result is dropped and its hold given back."""
    name = "race-queued"
    lock = client.lock(name)
    loop = asyncio.get_running_loop()
    task, _ = await acquire_with_result_queued(lock, loop, raw)
    assert raw.hgetall(name), "the acquire completed, so Redis holds the lock"
    assert not task.done()
    task.cancel()  # e.g. asyncio.timeout firing now
    with pytest.raises(asyncio.CancelledError):
        await task
    await released(client, raw, name)
    others_can_take(url, name)


@SELECTOR_LOOP_ONLY
async def test_the_turn_that_sets_the_result_resumes_the_task_so_no_cancel_comes_between(client, raw, url):
    """The turn of the loop that takes the acquire's reply also resumes the awaiting task with the
    result (crosslock's future runs the task's wake-up itself instead of scheduling it for a later
    turn): there is no moment where the result is set and a ``task.cancel()`` could still throw
    ``CancelledError`` into the task in its place. The task has the lock, and a cancel after that
    is a no-op that takes nothing away."""
    name = "race-set"
    lock = client.lock(name)
    loop = asyncio.get_running_loop()
    task, owner = await acquire_with_result_queued(lock, loop, raw)
    # Each pass lets the loop run once, this test's next step queued before the reader that takes
    # the result: the pass after that reader ran finds the task finished, not merely woken.
    while result_queued(loop):
        await asyncio.sleep(0)
    assert task.done() and task.result() is True
    assert task.cancel() is False
    assert raw.hgetall(name), "the task holds the lock"
    others_cannot_take(url, name)
    assert await lock._native.release_async(owner) is True
    await released(client, raw, name)
    others_can_take(url, name)


@SELECTOR_LOOP_ONLY
@pytest.mark.parametrize("moment", ["before-conversion", "queued-in-loop"])
async def test_a_dropped_nested_result_gives_back_one_hold_only(client, raw, redis_server, url, moment):
    """The same races for a re-entrant acquire (at the native level, where the outer holder's
    task can drive the inner future itself): only the hold the inner acquire won is given back."""
    name = f"race-nested-{moment}"
    lock = client.lock(name)
    await lock.acquire_async()
    owner = current_owner()
    loop = asyncio.get_running_loop()
    with hash_writes(redis_server, raw, name) as writes:
        if moment == "before-conversion":
            with writes_paused(raw):
                inner = lock._native.acquire_async(owner)
                wait_until(lambda: a_script_is_held_up(raw), what="the nested acquire to wait in Redis")
                inner.cancel()
            # Loop still blocked: the acquire wins (count 2).
            assert writes.wait_for(1) == ["hincrby"]
            # The loop runs: the bridge finds the future cancelled and gives that one hold back.
            assert await asyncio.to_thread(writes.wait_for, 2) == ["hincrby", "hincrby"]
        else:
            for _ in range(20):
                inner = lock._native.acquire_async(owner)
                if not inner.done():
                    break
                # Done within its first poll (see acquire_with_result_queued): the moment never
                # came; give that hold back and forget its two writes (counted below). Claimed
                # first: a PendingHold dropped unclaimed gives its hold back by itself, and the
                # release would then take the outer hold too.
                (await inner).claim()
                await lock._native.release_async(owner)
                await asyncio.to_thread(writes.wait_for, 2)
                writes.seen.clear()
            else:
                pytest.fail("every nested acquire completed within its first poll")
            wait_until(lambda: result_queued(loop), what="the nested result to be queued for the loop")
            assert raw.hgetall(name) == {client.holder(): "2"}
            inner.cancel()
            await asyncio.sleep(0)  # the queued result finds its future cancelled and is dropped
            assert await asyncio.to_thread(writes.wait_for, 2) == ["hincrby", "hincrby"]
    assert inner.cancelled()
    assert raw.hgetall(name) == {client.holder(): "1"}
    assert await lock.hold_count_async() == 1
    others_cannot_take(url, name)
    await lock.release_async()
    await released(client, raw, name)


async def test_a_claimed_result_is_kept(client, raw):
    """The ordinary path: the awaited hold is claimed, so nothing gives it back later."""
    name = "claimed"
    lock = client.lock(name)
    assert await lock.acquire_async() is True
    async with lock.acquired(timeout=1):
        assert await lock.hold_count_async() == 2
    pending = lock._native.acquire_async(current_owner())
    outcome = await pending
    assert outcome.claim() == 0 and outcome.claim() == 0  # acquired (a lock without a token)
    del outcome, pending  # dropping a claimed outcome gives nothing back
    await lock.release_async()
    assert raw.hgetall(name) == {client.holder(): "1"}
    await lock.release_async()
    await released(client, raw, name)


async def test_an_abandoned_or_dropped_result_gives_its_hold_back(client, raw, redis_server):
    name = "abandoned"
    lock = client.lock(name)
    await lock.acquire_async()
    owner = current_owner()
    with hash_writes(redis_server, raw, name) as writes:
        outcome = await lock._native.acquire_async(owner)
        assert raw.hgetall(name) == {client.holder(): "2"}
        outcome.abandon()
        outcome.abandon()  # once only
        assert outcome.claim() is not None  # it did acquire; the hold is just no longer there to take
        assert await asyncio.to_thread(writes.wait_for, 2) == ["hincrby", "hincrby"]
        assert raw.hgetall(name) == {client.holder(): "1"}
        await lock._native.acquire_async(owner)  # dropped unclaimed at once
        # (asyncio's future may keep the result in a reference cycle for a moment: collect it,
        # as the interpreter eventually would)
        gc.collect()
        assert await asyncio.to_thread(writes.wait_for, 4) == ["hincrby"] * 4
    assert raw.hgetall(name) == {client.holder(): "1"}
    not_acquired = await lock._native.acquire_async(owner + 10_000, 0.0)  # another owner, one try
    assert repr(not_acquired) == "<crosslock._native.PendingHold not acquired>"
    assert not_acquired.claim() is None
    await lock.release_async()
    await released(client, raw, name)


# -- #1: a cancelled nested acquire keeps the outer hold --------------------------------------


async def test_cancelling_a_nested_acquire_keeps_the_outer_hold(client, raw, redis_server, url):
    """The task holds the lock; its nested acquire is cancelled (as by ``asyncio.timeout``) while
    the acquire script is in flight. Once Redis ran it, the nested hold is given back and the
    outer one stays: counted once, exclusive, and released without ``LockLostError``."""
    name = "nested-cancel"
    lock = client.lock(name)
    await lock.acquire_async()
    with hash_writes(redis_server, raw, name) as writes:
        with writes_paused(raw):
            await cancelled_when(
                lock.acquire_async(), lambda: a_script_is_held_up(raw), "the nested acquire to wait in Redis"
            )
        # The script runs now (count 2); the cancelled acquire gives exactly that hold back.
        assert await asyncio.to_thread(writes.wait_for, 2) == ["hincrby", "hincrby"]
    assert raw.hgetall(name) == {client.holder(): "1"}
    assert await lock.hold_count_async() == 1
    assert await lock.is_held_async()
    others_cannot_take(url, name)
    await lock.release_async()  # no LockLostError, no NotHeldError
    await released(client, raw, name)
    assert not lock.lost


# -- #5: a cancelled release_async still releases ---------------------------------------------


async def test_a_release_cancelled_in_flight_still_releases(client, raw, url):
    """Like a second cancellation arriving during ``async with lock:``'s exit: the release that was
    sent completes, and the client's bookkeeping agrees (no renewal, no lost-lock report)."""
    name = "release-cancel"
    lost: list[str] = []
    lock = client.lock(name, on_lost=lambda lk: lost.append(lk.name))
    releasing = asyncio.Event()
    owners: list[int] = []

    async def worker() -> None:
        async with lock:
            owners.append(current_owner())
            raw.command("CLIENT", "PAUSE", PAUSE_MS, "WRITE")
            releasing.set()
        # (the exit's release_async is what gets cancelled)

    task = asyncio.ensure_future(worker())
    try:
        await releasing.wait()
        await poll(lambda: a_script_is_held_up(raw), "the release script to wait in Redis")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        raw.command("CLIENT", "UNPAUSE")
    await released(client, raw, name)
    assert not lock._native.is_lost(owners[0]) and lost == []
    others_can_take(url, name)
    assert lost == []


async def test_a_cancelled_nested_release_releases_one_hold(client, raw, url):
    name = "release-cancel-nested"
    lock = client.lock(name)
    await lock.acquire_async()
    await lock.acquire_async()
    with writes_paused(raw):
        await cancelled_when(lock.release_async(), lambda: a_script_is_held_up(raw), "the release to wait in Redis")
    await poll(lambda: raw.hgetall(name) == {client.holder(): "1"}, "the cancelled release to take one hold")
    assert await lock.hold_count_async() == 1
    others_cannot_take(url, name)
    await lock.release_async()
    await released(client, raw, name)
    assert not lock.lost


# -- #6: the owner's next acquire after a cancel ----------------------------------------------


def first_then_second(client: crosslock.Client, name: str, kind: str) -> tuple[Any, Any]:
    """The lock an owner takes first and the one it asks for next: for ``read-then-write`` a read
    lock then the write lock (refused as an upgrade while the read hold is there), for
    ``non-reentrant`` the same non-reentrant lock twice (refused as a re-entry)."""
    if kind == "read-then-write":
        rw = client.read_write_lock(name)
        return rw.read_lock(), rw.write_lock()
    lock = client.non_reentrant_lock(name)
    return lock, lock


async def as_owner(owner: crosslock.Owner, call: Callable[[], Awaitable[Any]]) -> Any:
    """Awaits ``call()`` as ``owner``."""
    with owner:
        return await call()


@pytest.mark.parametrize("kind", ["read-then-write", "non-reentrant"])
async def test_the_owners_next_acquire_waits_for_the_cancelled_ones_give_back(client, raw, url, kind):
    """A cancelled acquire returns at once while its win is given back in the background; the same
    owner's next acquire of that object must not see the hold it never got. Here the next acquire
    is sent while the cancelled one's script is still held up in Redis, so both reach Redis in
    that order: without waiting for the give-back, the write lock would be refused as an upgrade
    of the read hold, and the non-reentrant lock as a re-entry."""
    name = f"cancel-then-{kind}"
    owner = crosslock.Owner()
    first, second = first_then_second(client, name, kind)

    with writes_paused(raw):
        cancelled = asyncio.ensure_future(as_owner(owner, first.acquire_async))
        await asyncio.sleep(0)  # the task starts the native acquire and awaits it
        wait_until(lambda: a_script_is_held_up(raw), what="the first acquire to wait in Redis")
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        following = asyncio.ensure_future(as_owner(owner, lambda: second.acquire_async(timeout=10)))
        await asyncio.sleep(0.05)  # it is sent (or waits for the give-back) while Redis is held up
    assert await asyncio.wait_for(following, 15) is True
    with owner:
        assert await second.is_held_async()
        await second.release_async()
    await released(client, raw, name)
    others_can_take(url, name)


@SELECTOR_LOOP_ONLY
@pytest.mark.parametrize("kind", ["read-then-write", "non-reentrant"])
async def test_the_owners_next_acquire_waits_for_a_won_waits_give_back(client, raw, url, kind):
    """A busy lock's wait won while the event loop was busy, and its task was cancelled before the
    loop took the result: the acquire is dropped and its hold given back in the background. The
    owner's next acquire, made at once, must wait for that give-back rather than find the hold it
    never got (the write lock would be refused as an upgrade of the read hold, the non-reentrant
    lock as a re-entry)."""
    name = f"queued-then-{kind}"
    owner = crosslock.Owner()
    first, second = first_then_second(client, name, kind)
    loop = asyncio.get_running_loop()
    wakes = f"redisson_rwlock:{{{name}}}" if kind == "read-then-write" else channel(name)

    with crosslock.connect(url) as other:
        theirs = other.read_write_lock(name).write_lock() if kind == "read-then-write" else other.non_reentrant_lock(name)
        for i in range(10):
            assert theirs.acquire(blocking=False)
            task = asyncio.ensure_future(as_owner(owner, first.acquire_async))
            await poll(lambda: raw.command("PUBSUB", "NUMSUB", wakes)[1] > 0, "the acquire to wait")
            theirs.release()
            # The loop stays busy while the waiter is woken, wins, and queues its result.
            wait_until(lambda: result_queued(loop), what="the won wait's result to be queued for the loop")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await as_owner(owner, lambda: second.acquire_async(blocking=False)) is True, (
                f"round {i}: the next acquire found the given-back hold"
            )
            with owner:
                await second.release_async()
            await released(client, raw, name)


# -- the bridge's future towards asyncio's helpers ----------------------------------------------


async def test_a_calls_future_is_an_asyncio_future_to_every_helper(client, raw):
    """A native call's future runs the first done-callback added while it is pending (normally the
    awaiting task's wake-up) itself, in the turn that sets its result; every other callback, a
    removal, and the helpers that wrap futures (gather, wait, wait_for, shield) see a plain
    asyncio future."""
    native = client.lock("bridge-helpers")._native

    def pending_call() -> "asyncio.Future[bool]":
        # A call may finish within its first poll (see acquire_with_result_queued: on a busy
        # machine its reply can be back before that poll reads), so the server holds every
        # command for a moment: this one stays pending until this task yields, and its result is
        # then set on this loop's thread.
        assert raw.command("CLIENT", "PAUSE", "200", "ALL") == "OK"
        call = native.is_locked_async()
        assert not call.done(), "a call finished while the server held every command"
        return call

    seen: list[str] = []
    future = pending_call()
    future.add_done_callback(lambda f: seen.append(f"kept {f.result()}"))
    future.add_done_callback(lambda f: seen.append(f"other {f.result()}"))
    removed = lambda f: seen.append("removed")  # noqa: E731
    future.add_done_callback(removed)
    assert future.remove_done_callback(removed) == 1
    assert await future is False
    await asyncio.sleep(0)
    assert sorted(seen) == ["kept False", "other False"]

    seen.clear()
    future = pending_call()
    kept = lambda f: seen.append("kept")  # noqa: E731
    future.add_done_callback(kept)
    assert future.remove_done_callback(kept) == 1
    assert await future is False
    await asyncio.sleep(0)
    assert seen == []

    assert await asyncio.gather(native.is_locked_async(), native.is_locked_async()) == [False, False]
    done, pending = await asyncio.wait([native.is_locked_async()], timeout=10)
    assert not pending and done.pop().result() is False
    assert await asyncio.wait_for(native.is_locked_async(), 10) is False
    assert await asyncio.shield(native.is_locked_async()) is False
    assert not raw.command("EXISTS", "bridge-helpers")
