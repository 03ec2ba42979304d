"""The mistakes users make with the Python binding (issue 53), each caught instead of hanging or
leaking: a sync blocking call inside a running asyncio loop, ``with lock.acquire(...)``, a thread
or task that ends holding, a float passed as ``blocking``, ``timeout=None``."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

import crosslock
from support import python_env, wait_until

EVENT_LOOPS = ("asyncio", "uvloop")


# -- 1. a blocking sync call on the event loop's thread ------------------------------------------

FASTAPI_LIKE = """
import asyncio, sys
import crosslock

client = crosslock.connect(sys.argv[1])
lock = client.lock("orders:1")

async def handler(n):
    with lock:                          # the mistake: a sync `with` in an `async def`
        await asyncio.sleep(0.05)

async def main():
    results = await asyncio.gather(*(handler(n) for n in range(5)), return_exceptions=True)
    for r in results:
        print(type(r).__name__, r)

asyncio.run(main())
client.close()
"""


def test_a_sync_with_in_async_code_is_refused_instead_of_freezing_the_loop(url: str) -> None:
    # Task 1 holds and awaits; before the fix task 2's `with lock:` blocked the loop thread, so
    # task 1 never resumed and the process hung for good: the watchdog timeout turns that into a
    # failure instead of a hung suite.
    done = subprocess.run(
        [sys.executable, "-c", FASTAPI_LIKE, url],
        capture_output=True, text=True, timeout=60, env=python_env(),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 5
    for line in lines:  # even the first: a `with` there would block the loop for the others
        assert line.startswith("BlockingInEventLoopError "), line
        assert "`async with lock:`" in line and "'orders:1'" in line


async def test_every_blocking_sync_call_is_refused_in_a_running_loop_before_sending(client, raw) -> None:
    name = "mistake:loop"
    lock = client.lock(name)
    sem = client.semaphore(name + ":sem")
    pes = client.permit_expirable_semaphore(name + ":pes")
    latch = client.count_down_latch(name + ":latch")
    rw = client.read_write_lock(name + ":rw")
    multi = crosslock.MultiLock([client.lock(name + ":a"), client.fair_lock(name + ":b")])
    red = crosslock.RedLock([client.lock(name + ":c")])
    sem.try_set_permits(2)
    pes.try_set_permits(2)
    latch.try_set_count(1)

    def with_(cm):
        def enter():
            with cm:
                pass
        return enter

    calls = {
        "with lock": (with_(lock), "`async with lock:`"),
        "lock.acquire()": (lock.acquire, "`await lock.acquire_async()`"),
        "lock.acquire(timeout=5)": (lambda: lock.acquire(timeout=5), "`await lock.acquire_async()`"),
        "lock.acquired()": (with_(lock.acquired(timeout=5)), "`async with lock.acquired(...):`"),
        "fair": (with_(client.fair_lock(name + ":f")), "`async with lock:`"),
        "fenced token": (client.fenced_lock(name + ":t").acquire_token, "acquire_token_async()"),
        "fenced with": (with_(client.fenced_lock(name + ":t")), "`async with lock:`"),
        "spin": (with_(client.spin_lock(name + ":s")), "`async with lock:`"),
        "non-reentrant": (with_(client.non_reentrant_lock(name + ":n")), "`async with lock:`"),
        "read": (with_(rw.read_lock()), "`async with lock:`"),
        "write": (rw.write_lock().acquire, "`await lock.acquire_async()`"),
        "semaphore with": (with_(sem), "`async with semaphore:`"),
        "semaphore acquire": (lambda: sem.acquire(2), "`await semaphore.acquire_async()`"),
        "semaphore acquired": (with_(sem.acquired(timeout=1)), "`async with semaphore.acquired(...):`"),
        "pes acquire": (pes.acquire, "`await semaphore.acquire_async()`"),
        "pes acquired": (with_(pes.acquired()), "`async with semaphore.acquired(...):`"),
        "latch": (latch.wait, "`await latch.wait_async()`"),
        "latch timeout": (lambda: latch.wait(timeout=3), "`await latch.wait_async()`"),
        "multi with": (with_(multi), "`async with multi_lock:`"),
        "multi acquire": (multi.acquire, "`await multi_lock.acquire_async()`"),
        "redlock": (lambda: red.acquire(timeout=1), "`await multi_lock.acquire_async()`"),
    }
    before = raw.command("INFO", "commandstats")
    for what, (call, async_form) in calls.items():
        with pytest.raises(crosslock.BlockingInEventLoopError) as info:
            call()
        err = info.value
        assert isinstance(err, crosslock.InvalidArgumentError) and isinstance(err, RuntimeError), what
        assert err.code == "INVALID_ARGUMENT"
        assert "running asyncio event loop would block the loop" in str(err), what
        assert async_form in str(err), (what, str(err))
    # Refused before anything was sent: no script ran, and nothing is held or taken.
    after = raw.command("INFO", "commandstats")
    assert _scripts(after) == _scripts(before)
    assert sem.available_permits() == 2 and pes.available_permits() == 2
    assert not lock.locked() and latch.count() == 1


def _scripts(stats: object) -> int:
    text = stats.decode() if isinstance(stats, bytes) else str(stats)
    total = 0
    for line in text.splitlines():
        if line.startswith(("cmdstat_eval:", "cmdstat_evalsha:")):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


async def test_a_single_try_and_the_async_forms_stay_allowed_in_a_running_loop(client) -> None:
    lock = client.lock("mistake:try")
    assert lock.acquire(blocking=False)         # one try: bounded by the response timeout
    lock.release()
    assert lock.acquire(timeout=0)
    lock.release()
    assert client.count_down_latch("mistake:try:latch").wait(timeout=0)  # absent: open
    async with lock:
        assert lock.is_held()                   # sync queries are not waits
    assert await lock.acquire_async(timeout=None)
    await lock.release_async()
    # the blocking call belongs in a thread: asyncio.to_thread is allowed
    assert await asyncio.to_thread(lambda: bool(lock.acquire(timeout=1)) and (lock.release() or True))


# -- 2a. `with lock.acquire(...)` -----------------------------------------------------------------

def test_with_acquire_releases_on_exit_instead_of_leaking(client, other) -> None:
    lock = client.lock("mistake:with-acquire")
    with lock.acquire(timeout=2) as taken:    # meant: lock.acquired(timeout=2)
        assert taken and taken == True  # noqa: E712  (threading parity: compares as a bool)
        assert lock.is_held()
    assert not lock.is_held() and not lock.locked()   # before the fix: TypeError, lock held forever


def test_with_a_failed_acquire_raises_timeout_and_does_not_run_the_block(client, other) -> None:
    lock = client.lock("mistake:busy")
    other_lock = other.lock("mistake:busy")
    assert other_lock.acquire()
    ran = False
    result = lock.acquire(timeout=0.05)
    assert not result and result == False and repr(result) == "False"  # noqa: E712
    with pytest.raises(crosslock.LockTimeoutError, match="mistake:busy"):
        with result:
            ran = True
    assert not ran
    other_lock.release()


def test_with_semaphore_and_multi_lock_acquire_give_back_on_exit(client) -> None:
    sem = client.semaphore("mistake:sem")
    sem.try_set_permits(3)
    with sem.acquire(2, timeout=1):
        assert sem.available_permits() == 1
    assert sem.available_permits() == 3
    multi = crosslock.MultiLock([client.lock("mistake:m1"), client.lock("mistake:m2")])
    with multi.acquire(timeout=1):
        assert client.lock("mistake:m1").locked()
    assert not client.lock("mistake:m1").locked() and not client.lock("mistake:m2").locked()


# -- 2b. a thread or task that ends holding ---------------------------------------------------------

def test_a_thread_that_ends_holding_is_logged_and_released(client, other, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="crosslock")
    name = "mistake:thread-leak"
    fine = client.lock("mistake:fine")
    owner = crosslock.Owner()

    def worker() -> None:
        client.lock(name).acquire()   # never released; this line is named in the warning
        client.lock(name).acquire()   # held twice
        with fine:                    # released: not reported
            pass
        with owner:                   # a hand-off: meant to outlive this thread, not reported
            fine.acquire()
        client.lock(name + ":leased").acquire(lease=30)   # expires by itself: left to expire

    t = threading.Thread(target=worker, name="leaky-worker")
    t.start()
    t.join()
    # Another process gets it: released, not left renewed forever (before the fix this timed out).
    theirs = other.lock(name)
    assert theirs.acquire(timeout=20)
    theirs.release()
    record = wait_until(lambda: next((r for r in caplog.records if f"{name}'" in r.getMessage()), None))
    text = record.getMessage()
    assert record.levelno == logging.WARNING and record.name == "crosslock"
    assert "thread 'leaky-worker'" in text and "2 time(s)" in text and "Releasing it" in text
    assert "test_mistakes.py:" in text and client.id in text
    leased = wait_until(lambda: next((r for r in caplog.records if name + ":leased" in r.getMessage()), None))
    assert "Leaving it to expire after its lease" in leased.getMessage()
    assert client.lock(name + ":leased").locked()
    with owner:
        assert fine.is_held()         # the hand-off's hold was left alone
        fine.release()
    assert not any("mistake:fine" in r.getMessage() for r in caplog.records)


async def test_a_task_that_ends_holding_is_logged_and_released(client, other, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="crosslock")
    name = "mistake:task-leak"

    async def leaky() -> None:
        await client.lock(name).acquire_async()   # the task returns still holding

    await asyncio.create_task(leaky(), name="leaky-task")
    theirs = other.lock(name)
    assert await theirs.acquire_async(timeout=20)
    await theirs.release_async()
    record = wait_until(lambda: next((r for r in caplog.records if name in r.getMessage()), None))
    assert "asyncio task 'leaky-task'" in record.getMessage()
    assert "test_mistakes.py:" in record.getMessage()


async def test_the_holder_is_the_task_that_calls_also_when_another_task_awaits(client, other, caplog) -> None:
    """``asyncio.wait_for`` (before 3.12) and ``asyncio.gather`` await in a task of their own, which
    ends at once: the caller still holds what it asked for, and nothing is reported leaked."""
    caplog.set_level(logging.WARNING, logger="crosslock")
    lock, fenced = client.lock("mistake:wrapped"), client.fenced_lock("mistake:wrapped:f")
    multi = crosslock.MultiLock([client.lock("mistake:wrapped:m1"), client.lock("mistake:wrapped:m2")])
    assert await asyncio.wait_for(lock.acquire_async(), 10)
    (token,) = await asyncio.gather(fenced.acquire_token_async())
    assert token is not None
    assert await asyncio.wait_for(multi.acquire_async(), 10)
    # The wrapping tasks have ended: their done-callbacks run in the next loop turns, and any
    # release of a hold they were taken for as leaked runs on a helper thread, awaited here.
    for _ in range(3):
        await asyncio.sleep(0)
    for t in threading.enumerate():
        if t.name == "crosslock-leaked-hold":
            t.join(10)
    assert await lock.is_held_async() and await fenced.is_held_async()
    for name in ("mistake:wrapped", "mistake:wrapped:f", "mistake:wrapped:m1"):
        assert not await other.lock(name).acquire_async(blocking=False), f"{name}: not held any more"
    await lock.release_async()
    await fenced.release_async()
    await multi.release_async()
    assert not any("left held" in r.getMessage() or "ended" in r.getMessage() for r in caplog.records)


# -- 3. conventions ----------------------------------------------------------------------------------

def test_a_non_bool_blocking_is_refused_with_a_hint(client) -> None:
    lock = client.lock("mistake:blocking")
    with pytest.raises(crosslock.InvalidArgumentTypeError, match=r"did you mean timeout=1\.5\?"):
        lock.acquire(1.5)
    with pytest.raises(crosslock.InvalidArgumentError, match=r"did you mean timeout=2\?"):
        client.fenced_lock("mistake:blocking:f").acquire_token(2)
    with pytest.raises(crosslock.InvalidArgumentError, match="did you mean timeout=1.5"):
        crosslock.MultiLock([lock]).acquire(1.5)
    with pytest.raises(crosslock.InvalidArgumentError, match="blocking"):
        client.semaphore("mistake:blocking:s").acquire(1, blocking="yes")  # type: ignore[arg-type]
    with pytest.raises(crosslock.InvalidArgumentError, match="did you mean timeout=0.5"):
        client.permit_expirable_semaphore("mistake:blocking:p").acquire(blocking=0.5)  # type: ignore[arg-type]
    assert not lock.locked()          # refused before anything was taken


async def test_a_non_bool_blocking_is_refused_by_the_async_forms(client) -> None:
    with pytest.raises(crosslock.InvalidArgumentError, match="did you mean timeout=1.5"):
        await client.lock("mistake:blocking:a").acquire_async(1.5)


def test_timeout_none_means_no_limit_everywhere(client) -> None:
    lock = client.lock("mistake:none")
    assert lock.acquire(timeout=None)
    lock.release()
    with lock.acquired(timeout=None):
        pass
    sem = client.semaphore("mistake:none:s")
    sem.try_set_permits(1)
    assert sem.acquire(timeout=None)
    sem.release()
    pes = client.permit_expirable_semaphore("mistake:none:p")
    pes.try_set_permits(1)
    permit = pes.acquire(timeout=None)
    assert permit is not None
    pes.release(permit)
    assert crosslock.MultiLock([lock]).acquire(timeout=None)
    crosslock.MultiLock([lock]).release()
    assert client.count_down_latch("mistake:none:l").wait(timeout=-1)   # -1 as for locks


def test_semaphore_acquired_takes_a_timeout(client, other) -> None:
    sem = client.semaphore("mistake:sem-acquired")
    sem.try_set_permits(1)
    with sem.acquired(timeout=1) as s:
        assert s is sem and sem.available_permits() == 0
        with pytest.raises(crosslock.LockTimeoutError):
            with other.semaphore("mistake:sem-acquired").acquired(timeout=0.05):
                pass
    assert sem.available_permits() == 1


async def test_semaphore_acquired_async(client) -> None:
    sem = client.semaphore("mistake:sem-acquired-async")
    sem.try_set_permits(2)
    async with sem.acquired(2, timeout=1):
        assert await sem.available_permits_async() == 0
    assert await sem.available_permits_async() == 2


async def test_lost_event_is_set_in_the_holders_loop(fast_client, other) -> None:
    lock = fast_client.lock("mistake:lost-event")
    async with lock:
        lost = lock.lost_event()
        assert not lost.is_set()
        assert other.lock("mistake:lost-event").force_unlock()
        await asyncio.wait_for(lost.wait(), timeout=20)   # set by the watchdog's finding
        assert lock.lost
        with pytest.raises(crosslock.LockLostError):
            await lock.release_async()
        # a late call on a lost hold is set at once
        assert lock.lost_event().is_set()
        await lock.acquire_async()   # the `async with` releases this new hold on exit
