"""One conformance suite for every lock of the RLock family, parametrized over ``LOCK_FAMILY``.

Each kind is checked for what a user relies on, against a real redis-server: the Redisson layout
seen by a plain RESP client, exclusion between 8 threads and between 8 asyncio tasks (a
non-atomic GET/SET counter in Redis stays exact), reentrancy (or the NonReentrantLock's
refusal), wait limits, the watchdog, the lost signal after another client's force unlock, and the
cancellation of an asyncio waiter that leaves nothing behind.

A read lock excludes writers only: its exclusion tests mix readers and writers and check, with
counters in Redis that crosslock never touches, that no reader ever overlaps a writer.

A new lock type is covered by adding one ``Kind`` to ``LOCK_FAMILY``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import pytest

import crosslock
from support import Raw, channel, poll, wait_until

WATCHDOG = 0.5  # seconds: the short watchdog lease of the renewal and loss tests


def rw_channel(name: str) -> str:
    return f"redisson_rwlock:{{{name}}}"


def fair_channel(name: str, holder: str) -> str:
    return f"{channel(name)}:{holder}"


def fair_queue(name: str) -> str:
    return f"redisson_lock_queue:{{{name}}}"


def fair_timeouts(name: str) -> str:
    return f"redisson_lock_timeout:{{{name}}}"


def read_timeout_key(name: str, holder: str, k: int) -> str:
    return f"{{{name}}}:{holder}:rwlock_timeout:{k}"


def token_key(name: str) -> str:
    return f"redisson_lock_token:{{{name}}}"


@dataclass(frozen=True)
class Kind:
    """One lock type of the family.

    ``make(client, name, on_lost=None)`` builds it. ``rival`` is the kind it must exclude (itself unless set: a
    read lock excludes the write lock only). ``field(holder)`` is the hash field of a holder,
    ``mode`` the hash's ``mode`` field if it has one, ``waiter_channel(name, holder)`` the channel a
    waiter of this kind listens on (``None``: it never subscribes), ``released`` the payload a full
    release publishes (``None``: nothing, or only to a waiter's own channel).
    """

    id: str
    cls: type
    make: Callable[..., Any]
    field: Callable[[str], str] = lambda holder: holder
    mode: Optional[str] = None
    waiter_channel: Optional[Callable[[str, str], str]] = lambda name, holder: channel(name)
    released: Optional[str] = "0"
    rival: Optional["Kind"] = None
    reentrant: bool = True
    fair: bool = False
    read: bool = False
    fenced: bool = False

    @property
    def excludes(self) -> "Kind":
        return self.rival or self

    def hash(self, holder: str, count: int) -> dict[str, str]:
        """The lock hash Redisson stores for ``count`` holds of ``holder``."""
        layout = {self.field(holder): str(count)}
        if self.mode:
            layout["mode"] = self.mode
        return layout

    def keys_held(self, name: str, holder: str, count: int) -> dict[str, str]:
        """Every string key besides the hash while ``holder`` holds it ``count`` times → its value."""
        if self.read:
            return {read_timeout_key(name, holder, k): "1" for k in range(1, count + 1)}
        return {}

    def keys_left(self, name: str) -> set[str]:
        """The keys that outlive the lock (the fencing counter)."""
        return {token_key(name)} if self.fenced else set()


WRITE_LOCK = Kind(
    "ReadWriteLock.write_lock",
    crosslock.WriteLock,
    lambda c, name, **kw: c.read_write_lock(name, **kw).write_lock(),
    field=lambda holder: f"{holder}:write",
    mode="write",
    waiter_channel=lambda name, holder: rw_channel(name),
    released="1",
)

LOCK_FAMILY: list[Kind] = [
    Kind("Lock", crosslock.Lock, lambda c, name, **kw: c.lock(name, **kw)),
    Kind(
        "FairLock",
        crosslock.FairLock,
        lambda c, name, **kw: c.fair_lock(name, **kw),
        waiter_channel=fair_channel,
        released=None,  # only to the head of the queue, on its own channel
        fair=True,
    ),
    WRITE_LOCK,
    Kind(
        "ReadWriteLock.read_lock",
        crosslock.ReadLock,
        lambda c, name, **kw: c.read_write_lock(name, **kw).read_lock(),
        mode="read",
        waiter_channel=lambda name, holder: rw_channel(name),
        rival=WRITE_LOCK,
        read=True,
    ),
    Kind(
        "SpinLock",
        crosslock.SpinLock,
        # Retries every 5 ms, so that 8 contenders finish quickly.
        lambda c, name, **kw: c.spin_lock(name, backoff=crosslock.Backoff.constant(0.005), **kw),
        waiter_channel=None,
        released=None,
    ),
    Kind("FencedLock", crosslock.FencedLock, lambda c, name, **kw: c.fenced_lock(name, **kw), fenced=True),
    Kind(
        "NonReentrantLock",
        crosslock.NonReentrantLock,
        lambda c, name, **kw: c.non_reentrant_lock(name, **kw),
        reentrant=False,
    ),
    Kind(
        "NonReentrantFairLock",
        crosslock.NonReentrantFairLock,
        lambda c, name, **kw: c.non_reentrant_fair_lock(name, **kw),
        waiter_channel=fair_channel,
        released=None,
        fair=True,
        reentrant=False,
    ),
]

family = pytest.mark.parametrize("kind", LOCK_FAMILY, ids=[k.id for k in LOCK_FAMILY])


# -- helpers ------------------------------------------------------------------------------------


def script_calls(raw: Raw) -> int:
    """How many scripts Redis ran so far (a spin waiter's retries show up here)."""
    total = 0
    for line in raw.command("INFO", "commandstats").splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:")):
            total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


def all_keys(raw: Raw) -> set[str]:
    return set(raw.command("KEYS", "*"))


def subscribed_channels(raw: Raw) -> list[str]:
    return raw.command("PUBSUB", "CHANNELS", "*")


def wait_for_waiter(kind: Kind, raw: Raw, name: str, holder: str, calls_before: int) -> None:
    """Returns once the waiter ``holder`` of ``kind`` is seen waiting in Redis."""
    if kind.waiter_channel is None:
        wait_until(lambda: script_calls(raw) >= calls_before + 3, what="the spin waiter to retry")
        assert subscribed_channels(raw) == []
    else:
        listens_on = kind.waiter_channel(name, holder)
        wait_until(lambda: raw.numsub(listens_on) == 1, what="the waiter to subscribe")
    if kind.fair:
        wait_until(lambda: raw.command("LRANGE", fair_queue(name), 0, -1) == [holder], what="the waiter to queue")


def settled(kind: Kind, raw: Raw, name: str, holder: str) -> bool:
    """Nothing of waiter ``holder`` is left: no subscription and, for a fair lock, no queue entry."""
    if kind.waiter_channel is not None and raw.numsub(kind.waiter_channel(name, holder)) != 0:
        return False
    if kind.fair and (raw.command("EXISTS", fair_queue(name)) or raw.command("EXISTS", fair_timeouts(name))):
        return False
    return True


async def in_this_task(awaitable: Any, limit: float = 20.0) -> Any:
    """Awaits ``awaitable`` in the calling task (``asyncio.wait_for`` before 3.12 would run it in
    another task, another holder), failing the test if it takes longer than ``limit``."""
    me = asyncio.current_task()
    assert me is not None
    timer = asyncio.get_running_loop().call_later(limit, me.cancel)
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise AssertionError(f"still waiting after {limit}s: a hang") from None
    finally:
        timer.cancel()



@pytest.fixture
def short(url: str) -> Iterator[crosslock.Client]:
    """A client whose watchdog lease is WATCHDOG seconds."""
    c = crosslock.connect(url, watchdog_timeout=WATCHDOG)
    try:
        yield c
    finally:
        c.close()


# -- the raw layout -----------------------------------------------------------------------------


@family
def test_raw_layout_and_the_release_handing_over_to_a_waiter(kind, client, other, raw, redis_server):
    name = f"layout-{kind.id}"
    lock = kind.make(client, name)
    assert isinstance(lock, kind.cls) and lock.name == name
    holder = client.holder()
    assert holder == f"{client.id}:{holder.rsplit(':', 1)[1]}" and holder.rsplit(":", 1)[1].isdigit()

    assert lock.acquire()
    assert raw.command("TYPE", name) == "hash"
    assert raw.hgetall(name) == kind.hash(holder, 1)
    assert 29_000 < raw.command("PTTL", name) <= 30_000  # the default watchdog lease
    extra = kind.keys_held(name, holder, 1)
    for key, value in extra.items():
        assert raw.command("GET", key) == value
        assert 29_000 < raw.command("PTTL", key) <= 30_000
    if kind.fenced:
        assert raw.command("GET", token_key(name)) == "1"
        assert raw.command("PTTL", token_key(name)) == -1  # the counter outlives the lock
    assert all_keys(raw) == {name} | set(extra) | kind.keys_left(name)
    assert lock.holders() == [kind.field(holder)]

    # A waiter of another client: it subscribes to the kind's channel (a spin waiter never does),
    # and a fair waiter queues.
    rival = kind.excludes.make(other, name)
    waiter: dict[str, Any] = {}
    acquired, finish = threading.Event(), threading.Event()

    def wait_in_thread() -> None:
        waiter["holder"] = other.holder()
        waiter["acquired"] = bool(rival.acquire(timeout=30))
        acquired.set()
        finish.wait(10)
        rival.release()

    calls = script_calls(raw)
    t = threading.Thread(target=wait_in_thread, daemon=True)
    t.start()
    wait_until(lambda: "holder" in waiter)
    wait_for_waiter(kind.excludes, raw, name, waiter["holder"], calls)
    if kind.fair:
        timeouts = raw.command("ZRANGE", fair_timeouts(name), 0, -1)
        assert timeouts == [waiter["holder"]]
    assert not acquired.is_set()

    # The release publishes on the kind's channel; a spin lock's publishes nothing (a marker
    # published after it is the next message).
    listen = (
        kind.excludes.waiter_channel(name, waiter["holder"])
        if kind.excludes.waiter_channel and (kind.released or kind.fair)
        else channel(name)
    )
    expected = "0" if kind.fair else kind.released
    with redis_server.raw() as sub:
        sub.subscribe(listen)
        lock.release()
        if expected is None:
            raw.command("PUBLISH", listen, "marker")
            assert sub.next_message(timeout=10) == ["message", listen, "marker"]
        else:
            assert sub.next_message(timeout=10) == ["message", listen, expected]
    assert acquired.wait(10) and waiter["acquired"] is True
    assert raw.hgetall(name) == kind.excludes.hash(waiter["holder"], 1)
    if kind.fair:
        assert raw.command("EXISTS", fair_queue(name), fair_timeouts(name)) == 0
    finish.set()
    t.join(10)
    assert all_keys(raw) == kind.keys_left(name)
    if kind.fenced:
        assert raw.command("GET", token_key(name)) == "2"


# -- exclusion ----------------------------------------------------------------------------------

ROUNDS = 12


def critical_section_check(r: Raw, role: str) -> None:
    """Enters the section as ``role`` ("writer" or "reader"), recording overlaps in Redis."""
    if role == "writer":
        assert r.command("INCR", "writers-inside") == 1, "two writers inside at once"
        assert int(r.command("GET", "readers-inside") or 0) == 0, "a writer inside with a reader"
    else:
        r.command("INCR", "readers-inside")
        assert int(r.command("GET", "writers-inside") or 0) == 0, "a reader inside with a writer"


def leave(r: Raw, role: str) -> None:
    r.command("DECR", "writers-inside" if role == "writer" else "readers-inside")


def roles(kind: Kind, n: int) -> list[str]:
    """Who the ``n`` contenders are: all writers (exclusive kinds), or half readers."""
    return ["reader" if kind.read and i % 2 else "writer" for i in range(n)]


@family
def test_eight_threads_exclude_each_other(kind, client, other, url, redis_server, raw):
    name = f"threads-{kind.id}"
    locks = {
        (c_index, role): (kind.make(c, name) if role == "reader" else kind.excludes.make(c, name))
        for c_index, c in enumerate((client, other))
        for role in ("reader", "writer")
    }
    errors: list[BaseException] = []

    def worker(i: int, role: str) -> None:
        lock = locks[(i % 2, role)]
        try:
            with redis_server.raw() as r:
                for _ in range(ROUNDS):
                    with lock:
                        critical_section_check(r, role)
                        value = int(r.command("GET", "counter") or 0)
                        time.sleep(0.001)  # widen the race window
                        if role == "writer":
                            r.command("SET", "counter", value + 1)
                        else:
                            assert int(r.command("GET", "counter") or 0) == value, "a write while reading"
                        leave(r, role)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i, role)) for i, role in enumerate(roles(kind, 8))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a contender is stuck"
    assert not errors, errors
    writers = roles(kind, 8).count("writer")
    assert int(raw.command("GET", "counter")) == writers * ROUNDS
    assert all_keys(raw) - {"counter", "writers-inside", "readers-inside"} == kind.keys_left(name)


@family
async def test_eight_asyncio_tasks_exclude_each_other(kind, client, redis_server, raw):
    name = f"tasks-{kind.id}"
    reader, writer = kind.make(client, name), kind.excludes.make(client, name)

    async def worker(role: str) -> None:
        lock = reader if role == "reader" else writer
        with redis_server.raw() as r:
            for _ in range(ROUNDS):
                async with lock:
                    critical_section_check(r, role)
                    value = int(r.command("GET", "counter") or 0)
                    await asyncio.sleep(0.001)  # every other task runs meanwhile
                    if role == "writer":
                        r.command("SET", "counter", value + 1)
                    else:
                        assert int(r.command("GET", "counter") or 0) == value, "a write while reading"
                    leave(r, role)

    await asyncio.wait_for(asyncio.gather(*(worker(role) for role in roles(kind, 8))), 60)
    writers = roles(kind, 8).count("writer")
    assert int(raw.command("GET", "counter")) == writers * ROUNDS
    assert all_keys(raw) - {"counter", "writers-inside", "readers-inside"} == kind.keys_left(name)


# -- reentrancy ---------------------------------------------------------------------------------


@family
def test_reentrancy_or_the_non_reentrant_refusal(kind, client, other, raw):
    name = f"reentry-{kind.id}"
    lock = kind.make(client, name)
    holder = client.holder()
    assert lock.acquire()
    if kind.reentrant:
        assert lock.acquire(blocking=False)
        with lock:
            assert lock.hold_count() == 3
            assert raw.hgetall(name) == kind.hash(holder, 3)
        assert lock.hold_count() == 2 and lock.is_held()
        assert raw.hgetall(name) == kind.hash(holder, 2)
        for key, value in kind.keys_held(name, holder, 2).items():
            assert raw.command("GET", key) == value
        if kind.fenced:
            assert raw.command("GET", token_key(name)) == "3"  # every acquisition, re-entries too
        assert not kind.excludes.make(other, name).acquire(blocking=False)
        lock.release()
        assert lock.locked() and lock.hold_count() == 1
        assert raw.hgetall(name) == kind.hash(holder, 1)
        assert not kind.excludes.make(other, name).acquire(blocking=False)
        lock.release()
    else:
        # Never a hang: each further acquire by the holder is refused at once, however long it
        # may wait. (The holder is this thread; a hang would fail the test on pytest's timeout.)
        outcome: dict[str, Any] = {}
        for how in ({}, {"timeout": 30}, {"blocking": False}):
            try:
                outcome[str(how)] = bool(lock.acquire(**how))
            except crosslock.NonReentrantError as e:
                outcome[str(how)] = e
        for how, err in outcome.items():
            assert isinstance(err, crosslock.NonReentrantError), (how, err)
            assert isinstance(err, RuntimeError)
            assert err.code == "NON_REENTRANT"
            assert err.lock_name == name and name in str(err)
            assert err.holder == holder
        assert raw.hgetall(name) == kind.hash(holder, 1)  # Redis unchanged
        assert lock.hold_count() == 1
        lock.release()
    assert not lock.locked()
    assert all_keys(raw) == kind.keys_left(name)


@family
async def test_reentrancy_of_an_asyncio_task(kind, client, raw):
    name = f"reentry-async-{kind.id}"
    lock = kind.make(client, name)

    async def task_body() -> str:
        holder = client.holder()
        assert await lock.acquire_async()
        if kind.reentrant:
            assert await lock.acquire_async()
            assert await lock.hold_count_async() == 2
            assert raw.hgetall(name) == kind.hash(holder, 2)
            await lock.release_async()
        else:
            with pytest.raises(crosslock.NonReentrantError) as info:
                await in_this_task(lock.acquire_async())
            assert info.value.lock_name == name
            assert raw.hgetall(name) == kind.hash(holder, 1)
        assert await lock.hold_count_async() == 1
        # Another task is another holder: excluded.
        async def another_task_tries() -> bool:
            return await kind.excludes.make(client, name).acquire_async(blocking=False)

        assert await asyncio.create_task(another_task_tries()) is False
        await lock.release_async()
        return holder

    holder = await asyncio.create_task(task_body())
    assert holder != client.holder()
    assert all_keys(raw) == kind.keys_left(name)


# -- wait limits --------------------------------------------------------------------------------


@family
def test_a_wait_limit_returns_false_while_another_client_holds(kind, client, other, raw):
    name = f"busy-{kind.id}"
    lock = kind.make(client, name)
    held = kind.excludes.make(other, name)
    assert held.acquire(lease=60)
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(timeout=0)
    started = time.monotonic()
    assert not lock.acquire(timeout=0.3)
    assert time.monotonic() - started >= 0.25  # it did wait
    assert not lock.is_held() and lock.hold_count() == 0
    with pytest.raises(crosslock.LockTimeoutError) as info:
        with lock.acquired(timeout=0.2):
            pytest.fail("entered a lock another client holds")
    assert info.value.lock_name == name and info.value.code == "TIMEOUT"
    # The timed-out waits left nothing: no subscription, no queue entry, the holder unchanged.
    wait_until(lambda: settled(kind, raw, name, client.holder()), what="the timed-out waits to settle")
    assert raw.hgetall(name) == kind.excludes.hash(other.holder(), 1)
    held.release()
    assert lock.acquire(timeout=10)
    lock.release()
    assert all_keys(raw) == kind.keys_left(name)


@family
async def test_an_asyncio_wait_limit_returns_false(kind, client, other, raw):
    name = f"busy-async-{kind.id}"
    held = kind.excludes.make(other, name)
    assert await held.acquire_async(lease=60)
    lock = kind.make(client, name)
    assert await lock.acquire_async(timeout=0.3) is False
    assert not await lock.is_held_async()
    await poll(lambda: settled(kind, raw, name, client.holder()), "the timed-out wait to settle")
    held.release()
    assert await lock.acquire_async(timeout=10) is True
    await lock.release_async()


# -- watchdog -----------------------------------------------------------------------------------


@family
def test_the_watchdog_keeps_a_hold_past_its_lease(kind, short, raw):
    name = f"renewed-{kind.id}"
    lock = kind.make(short, name)
    holder = short.holder()
    assert lock.acquire()
    assert 0 < raw.command("PTTL", name) <= WATCHDOG * 1000
    timeout_keys = list(kind.keys_held(name, holder, 1))
    # Watch it for well over two leases: it must never be gone in between.
    until = time.monotonic() + 2.6 * WATCHDOG
    while time.monotonic() < until:
        assert raw.hgetall(name) == kind.hash(holder, 1), "the lock expired while held"
        for key in timeout_keys:
            assert raw.command("EXISTS", key) == 1, "a read hold's timeout key expired while held"
        time.sleep(0.05)
    assert lock.is_held() and not lock.lost
    assert 0 < raw.command("PTTL", name) <= WATCHDOG * 1000  # renewed with the watchdog lease
    lock.release()
    assert all_keys(raw) == kind.keys_left(name)


# -- the lost signal ----------------------------------------------------------------------------


@family
def test_force_unlock_by_another_client_signals_the_loss(kind, short, other, raw):
    name = f"forced-{kind.id}"
    fired = threading.Event()
    seen: list[Any] = []

    def on_lost(lk: Any) -> None:
        seen.append(lk)
        fired.set()

    lock = kind.make(short, name, on_lost=on_lost)
    holder = short.holder()
    assert lock.acquire()
    assert not lock.lost
    assert kind.make(other, name).force_unlock() is True
    assert raw.command("EXISTS", name) == 0
    assert fired.wait(10), "on_lost was not called"
    assert seen[0] is lock
    assert lock.lost
    with pytest.raises(crosslock.LockLostError) as info:
        lock.release()
    assert info.value.lock_name == name and info.value.holder == kind.field(holder)
    assert info.value.code == "LOCK_LOST"
    assert lock.acquire()  # acquiring again clears the flag
    assert not lock.lost
    lock.release()
    assert all_keys(raw) == kind.keys_left(name)


# -- cancellation -------------------------------------------------------------------------------


@family
async def test_a_cancelled_asyncio_waiter_leaves_nothing(kind, client, other, raw):
    name = f"cancelled-{kind.id}"
    held = kind.excludes.make(other, name)
    assert await held.acquire_async(lease=60)
    holder_layout = raw.hgetall(name)
    lock = kind.make(client, name)
    waiter: dict[str, str] = {}

    async def wait_for_it() -> bool:
        waiter["holder"] = client.holder()
        return await lock.acquire_async()

    calls = script_calls(raw)
    task = asyncio.create_task(wait_for_it())
    await poll(lambda: "holder" in waiter, "the waiter to start")
    await asyncio.to_thread(wait_for_waiter, kind, raw, name, waiter["holder"], calls)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Settled: no subscription (PUBSUB NUMSUB 0), no queue entry, no deadline, the holder untouched.
    await poll(lambda: settled(kind, raw, name, waiter["holder"]), "the cancelled waiter to leave no trace")
    assert subscribed_channels(raw) == []
    assert raw.hgetall(name) == holder_layout
    assert all_keys(raw) == {name} | set(kind.excludes.keys_held(name, other.holder(), 1)) | kind.keys_left(name)
    held.release()
    assert all_keys(raw) == kind.keys_left(name)
    # Nothing stale on the client side either: another task takes it at once.

    async def take_and_give_back() -> bool:
        taken = await lock.acquire_async(blocking=False)
        if taken:
            await lock.release_async()
        return taken

    assert await asyncio.create_task(take_and_give_back()) is True
    assert all_keys(raw) == kind.keys_left(name)


# -- extend -------------------------------------------------------------------------------------


def assert_not_taken(kind: Kind, other: crosslock.Client, name: str) -> None:
    """Another client cannot take ``kind``'s hold on ``name`` (its rival tries once)."""
    rival = kind.excludes.make(other, name)
    assert not rival.acquire(blocking=False), "another client took it"


@family
def test_extend_keeps_a_hold_past_its_first_lease(kind, client, other, raw):
    name = f"extend-{kind.id}"
    lock = kind.make(client, name)
    holder = client.holder()
    assert lock.acquire(lease=0.3)
    lock.extend(5)
    assert raw.command("PTTL", name) > 3000
    for key in kind.keys_held(name, holder, 1):
        assert raw.command("PTTL", key) > 3000, "a read hold's timeout key kept its lease"
    time.sleep(0.45)  # past the first lease
    assert_not_taken(kind, other, name)
    assert lock.is_held() and not lock.lost
    lock.release()
    assert all_keys(raw) == kind.keys_left(name)


@family
async def test_extend_async_keeps_a_hold_past_its_first_lease(kind, client, other, raw):
    name = f"extend-async-{kind.id}"
    lock = kind.make(client, name)
    assert await in_this_task(lock.acquire_async(lease=0.3))
    await in_this_task(lock.extend_async(5))
    assert raw.command("PTTL", name) > 3000
    await asyncio.sleep(0.45)
    assert_not_taken(kind, other, name)
    assert not lock.lost
    await in_this_task(lock.release_async())


@family
def test_extend_of_a_watchdog_hold_becomes_a_lease_that_runs_out(kind, client, raw):
    name = f"extend-dog-{kind.id}"
    fired = threading.Event()
    lock = kind.make(client, name, on_lost=lambda lk: fired.set())
    assert lock.acquire()
    lock.extend(0.4)
    assert 0 < raw.command("PTTL", name) <= 400
    assert fired.wait(10), "a watchdog hold extended was renewed past its new lease"
    assert lock.lost
    with pytest.raises(crosslock.LockLostError):
        lock.release()


@family
def test_extend_is_refused_when_not_held_and_lost_when_force_unlocked(kind, client, other, raw):
    name = f"extend-refused-{kind.id}"
    lock = kind.make(client, name)
    with pytest.raises(crosslock.NotHeldError) as info:
        lock.extend(5)
    assert info.value.code == "NOT_HELD" and "cannot extend" in str(info.value)
    # Another thread's hold is not the caller's to extend.
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        lock.acquire()
        taken.set()
        done.wait(10)
        lock.release()

    t = threading.Thread(target=hold)
    t.start()
    assert taken.wait(10)
    with pytest.raises(crosslock.NotHeldError):
        lock.extend(5)
    done.set()
    t.join()

    assert lock.acquire()
    assert kind.make(other, name).force_unlock() is True
    with pytest.raises(crosslock.LockLostError) as lost:
        lock.extend(5)
    assert lost.value.code == "LOCK_LOST" and lost.value.lock_name == name
    assert lock.lost
    assert raw.command("EXISTS", name) == 0, "the extend wrote"
    with pytest.raises(crosslock.LockLostError):
        lock.release()
    with pytest.raises(crosslock.InvalidArgumentError):
        lock.extend(0)
    with pytest.raises(crosslock.InvalidArgumentError):
        lock.extend("5")  # type: ignore[arg-type]


# -- the decorator ------------------------------------------------------------------------------


@family
def test_a_lock_decorates_a_function_and_each_call_holds_it(kind, client, other):
    name = f"decorated-{kind.id}"
    lock = kind.make(client, name)
    seen: list[bool] = []

    @lock
    def work(x: int) -> int:
        """Doubles."""
        seen.append(lock.is_held())
        assert_not_taken(kind, other, name)
        return 2 * x

    assert work(21) == 42 and work.__doc__ == "Doubles." and work.__name__ == "work"
    assert seen == [True] and not lock.locked()

    @lock
    def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError):
        fails()
    assert not lock.locked(), "a raising call kept the lock"
    with lock:  # still a context manager
        assert lock.is_held()


@family
async def test_a_lock_decorates_a_coroutine_function_per_task(kind, client, other):
    name = f"decorated-async-{kind.id}"
    lock = kind.make(client, name)
    inside = 0
    most = 0

    @lock
    async def work(x: int) -> int:
        nonlocal inside, most
        assert await lock.is_held_async()
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.02)
        inside -= 1
        return x

    assert asyncio.iscoroutinefunction(work)
    results = await asyncio.gather(*(work(i) for i in range(4)))
    assert results == [0, 1, 2, 3]
    if not kind.read:
        assert most == 1, "two tasks ran the decorated function at once"
    assert not await lock.locked_async()


def test_acquired_decorates_with_a_wait_limit(client, other):
    lock = client.lock("decorated-limit")

    @lock.acquired(timeout=0.1, lease=5)
    def work() -> float:
        remaining = lock.remaining_lease()
        assert remaining is not None
        return remaining

    assert 0 < work() <= 5
    assert other.lock("decorated-limit").acquire()
    with pytest.raises(crosslock.LockTimeoutError):
        work()
    with pytest.raises(crosslock.InvalidArgumentTypeError):
        lock(42)  # type: ignore[arg-type]
