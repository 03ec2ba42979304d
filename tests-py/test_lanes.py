"""The calling thread's own round trips ("lanes"): a sync method makes an uncontended call's round
trip on the caller's thread, an async one on its event loop, each over a connection of its own.
Whatever happens to those connections, callers see the same results as on the shared one: no
error after the server killed connections, none after an idle timeout, no leaked connections
across threads and event loops, and a reply lost on a lane never leaves a hold behind."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

import crosslock
from support import Raw, RedisServer, wait_until

EVENT_LOOPS = ("asyncio", "uvloop")  # what `run` runs the async calls on (see conftest.py)


def normal_clients(raw: Raw) -> int:
    return len(raw.clients())


def pairs(lock: crosslock.Lock, n: int) -> None:
    for _ in range(n):
        assert lock.acquire(timeout=5)
        lock.release()


async def pairs_async(lock: crosslock.Lock, n: int) -> None:
    for _ in range(n):
        assert await lock.acquire_async(timeout=5)
        await lock.release_async()


def test_sync_calls_survive_connections_killed_between_them(client: crosslock.Client, raw: Raw) -> None:
    lock = client.lock("lanes:killed")
    for _ in range(5):
        pairs(lock, 3)
        raw.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        pairs(lock, 3)
    assert raw.command("EXISTS", "lanes:killed") == 0


def test_async_calls_survive_connections_killed_between_them(client: crosslock.Client, raw: Raw, run) -> None:
    lock = client.lock("lanes:killed-async")

    async def main() -> None:
        for _ in range(5):
            await pairs_async(lock, 3)
            raw.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            await pairs_async(lock, 3)

    run(main())
    assert raw.command("EXISTS", "lanes:killed-async") == 0


def test_calls_after_an_idle_timeout_succeed(run) -> None:
    server = RedisServer("--timeout", "1")
    try:
        c = crosslock.connect(server.url)
        lock = c.lock("lanes:idle")
        for _ in range(2):
            pairs(lock, 3)
            run(pairs_async(lock, 3))
            time.sleep(1.3)
        pairs(lock, 3)
        run(pairs_async(lock, 3))
        c.close()
    finally:
        server.stop()


def test_many_threads_and_event_loops_do_not_pile_up_connections(client: crosslock.Client, raw: Raw, run) -> None:
    before = normal_clients(raw)

    def worker(i: int) -> None:
        lock = client.lock(f"lanes:t{i}")
        pairs(lock, 30)
        run(pairs_async(lock, 30))

    for _ in range(3):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # Every one of those loops is gone and their lanes with them; the sync lanes close once idle.
    wait_until(lambda: normal_clients(raw) <= before, what="lanes closed")
    assert all(raw.command("EXISTS", f"lanes:t{i}") == 0 for i in range(8))


def test_a_client_closed_while_its_loop_lane_is_unused_leaves_no_connection_behind(url: str, raw: Raw, run) -> None:
    """Calls in quick succession open a lane for their loop in the background; it waits in the
    loop until the loop's next call takes it. A client closed before that call used to leave it
    open for as long as the loop lived: one more connection on the server per client closed so."""

    async def main() -> None:
        before = normal_clients(raw)
        for _ in range(3):
            c = crosslock.connect(url)
            lock = c.lock("lanes:unused")
            await pairs_async(lock, 1)  # connects; the scripts' first runs go the usual way
            connected = normal_clients(raw)
            await pairs_async(lock, 1)  # asks this loop for a lane twice in quick succession
            await wait_until_async(lambda: normal_clients(raw) > connected, what="a lane to open")
            await c.aclose()
            await wait_until_async(
                lambda: normal_clients(raw) == before, what="every connection of the closed client to close"
            )

    run(main())


async def wait_until_async(condition: Callable[[], bool], *, what: str, timeout: float = 10.0) -> None:
    """Waits until `condition()` holds, sleeping on the running loop rather than blocking it."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.02)


def test_an_event_loops_calls_go_over_a_connection_of_its_own(client: crosslock.Client, raw: Raw, run) -> None:
    """On either loop, a task's calls are made on a connection the loop itself watches (one, for
    all its tasks), and that connection closes when the loop goes."""
    lock = client.lock("lanes:own")
    before = set(raw.clients())

    async def main() -> set[str]:
        await asyncio.gather(*(pairs_async(client.lock(f"lanes:own{i}"), 20) for i in range(4)))
        return set(raw.clients()) - before

    opened = run(main())
    assert len(opened) == 1, f"the loop's calls used {len(opened)} new connections, not one"
    wait_until(lambda: not set(raw.clients()) & opened, what="the loop's connection to close with the loop")
    assert not lock.locked()


def test_concurrent_tasks_share_a_loop_lane_and_each_gets_its_own_reply(
    client: crosslock.Client, other: crosslock.Client, raw: Raw, run
) -> None:
    """Forty tasks at once on one loop: replies come back in order on one connection, and each
    task gets its own (half the locks are busy, so the answers differ)."""
    locks = [client.lock(f"lanes:c{i}") for i in range(40)]
    busy = [other.lock(f"lanes:c{i}") for i in range(0, 40, 2)]
    for lock in busy:
        assert lock.acquire(timeout=5)

    async def one(i: int) -> tuple[bool, int]:
        got = await locks[i].acquire_async(timeout=0)
        count = await locks[i].hold_count_async()
        if got:
            await locks[i].release_async()
        return got, count

    async def main() -> None:
        await pairs_async(locks[1], 3)
        for _ in range(5):
            results = await asyncio.gather(*(one(i) for i in range(40)))
            assert results == [(False, 0) if i % 2 == 0 else (True, 1) for i in range(40)]

    run(main())
    for lock in busy:
        lock.release()
    assert all(raw.command("EXISTS", f"lanes:c{i}") == 0 for i in range(40))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_acquire_whose_reply_is_lost_leaves_no_hold_behind(flavour: str, run) -> None:
    """The server stops with an acquire on its way over a lane: the caller stops waiting after the
    response timeout, the request still runs when the server resumes, and whatever the acquire
    finally returns, the lock ends up held once (by a caller that knows it) or not at all."""
    server = RedisServer()
    try:
        c = crosslock.connect(server.url, response_timeout=0.3)
        lock = c.lock("lanes:lost")
        raw = server.raw()
        for _ in range(3):
            pairs(lock, 2)
            run(pairs_async(lock, 2))
            os.kill(server.process.pid, signal.SIGSTOP)
            timer = threading.Timer(0.6, os.kill, (server.process.pid, signal.SIGCONT))
            timer.start()
            try:
                if flavour == "sync":
                    got = bool(lock.acquire(timeout=10))
                    count = lock.hold_count() if got else 0
                    if got:
                        lock.release()
                else:
                    async def attempt() -> tuple[bool, int]:
                        got = await lock.acquire_async(timeout=10)
                        count = await lock.hold_count_async() if got else 0
                        if got:
                            await lock.release_async()
                        return got, count

                    got, count = run(attempt())
            except crosslock.RedisUnavailableError:
                got, count = False, 0
            finally:
                timer.join()
            assert count == (1 if got else 0)
            wait_until(lambda: raw.command("EXISTS", "lanes:lost") == 0, timeout=5, what="no hold left")
        c.close()
    finally:
        server.stop()



@pytest.mark.parametrize("lanes", ["none", "sync", "all"])
def test_lanes_says_which_callers_open_connections_of_their_own(url: str, raw: Raw, run, lanes: str) -> None:
    """``lanes="none"``: a burst of uncontended calls, sync or async, opens no connection beyond
    the client's usual ones. ``"sync"``: sync methods get lanes, an event loop none. ``"all"`` (the
    default): both do."""
    c = crosslock.connect(url, lanes=lanes)  # type: ignore[arg-type]
    try:
        lock = c.lock("lanes:switch")
        pairs(lock, 1)  # connects
        # Two calls in quick succession may have opened a sync lane: it closes once idle (within
        # about a second), and the client's usual connections are what is left.
        time.sleep(1.5)
        usual = normal_clients(raw)

        async def loop_burst() -> bool:
            # Counted while the loop lives: its lane closes with it.
            deadline = time.monotonic() + (10 if lanes == "all" else 1)
            while time.monotonic() < deadline:
                await pairs_async(lock, 50)
                await asyncio.sleep(0.05)
                if normal_clients(raw) > usual:
                    return True
            return False

        loop_opened = run(loop_burst())
        wait_until(lambda: normal_clients(raw) <= usual, what="the loop's lane to close with its loop")
        deadline = time.monotonic() + (10 if lanes != "none" else 1)
        sync_opened = False
        while not sync_opened and time.monotonic() < deadline:
            pairs(lock, 50)
            time.sleep(0.05)
            sync_opened = normal_clients(raw) > usual
        expected = {"none": (False, False), "sync": (True, False), "all": (True, True)}[lanes]
        assert (sync_opened, loop_opened) == expected
    finally:
        c.close()


def test_a_bad_lanes_value_is_refused_naming_the_allowed_ones(url: str) -> None:
    for bad in ("off", "ALL", ""):
        with pytest.raises(ValueError, match="'all', 'sync', 'none'") as refused:
            crosslock.connect(url, lanes=bad)  # type: ignore[arg-type]
        assert isinstance(refused.value, crosslock.InvalidArgumentError)
    with pytest.raises(crosslock.InvalidArgumentTypeError, match="lanes"):
        crosslock.connect(url, lanes=None)  # type: ignore[arg-type]
