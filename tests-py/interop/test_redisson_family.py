"""Every other lock of the family against the real Redisson (4.7.0, in a JVM, see tests-java/):
FairLock, SpinLock, FencedLock, NonReentrantLock, NonReentrantFairLock and both halves of the
ReadWriteLock.

For each exclusive kind, both directions: a Java holder blocks our waiter, whose wait is then ended
by Java's unlock (a wake-up: every lease involved is 30 s or more), and ours blocks a Java waiter
until our release; the hash holds each side's holder as Redisson writes it; Java's forceUnlock
reaches our lost signal. Then what only some kinds do: a fair queue mixing Java and our waiters
is served in order, a non-reentrant lock is refused to its own holder on both sides, a Java writer
and our readers exclude each other.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

import crosslock
from java_driver import JavaDriver
from support import Raw, channel, wait_until
from test_redisson_lock import MAX_GAP_NS, WOKEN_WITHIN, Waiter

Make = Callable[[crosslock.Client, str], Any]


def rw_channel(name: str) -> str:
    return f"redisson_rwlock:{{{name}}}"


# ours, the Java driver's, how to make ours, the suffix of the hash field, the channel a blocked
# waiter of ours subscribes to (None: the spin lock never subscribes)
KINDS: list[tuple[str, str, Make, str, Callable[[str, str], str] | None]] = [
    ("fair_lock", "fair", lambda c, n: c.fair_lock(n), "", lambda n, h: f"{channel(n)}:{h}"),
    ("spin_lock", "spin", lambda c, n: c.spin_lock(n), "", None),
    ("fenced_lock", "fenced", lambda c, n: c.fenced_lock(n), "", lambda n, h: channel(n)),
    ("non_reentrant_lock", "nonReentrant", lambda c, n: c.non_reentrant_lock(n), "", lambda n, h: channel(n)),
    (
        "non_reentrant_fair_lock",
        "nonReentrantFair",
        lambda c, n: c.non_reentrant_fair_lock(n),
        "",
        lambda n, h: f"{channel(n)}:{h}",
    ),
    ("write_lock", "write", lambda c, n: c.read_write_lock(n).write_lock(), ":write", lambda n, h: rw_channel(n)),
]
IDS = [k[0] for k in KINDS]


def blocked(raw: Raw, waiter: Waiter, name: str, waits_on: Callable[[str, str], str] | None) -> None:
    """Our waiter is verifiably waiting: subscribed to its channel (or, for the spin lock, still
    without an answer after a few of its back-off pauses)."""
    wait_until(lambda: waiter.holder is not None, what="the waiter to start")
    if waits_on is not None:
        ch = waits_on(name, waiter.holder)
        wait_until(lambda: raw.numsub(ch) > 0, what=f"our waiter to subscribe to {ch}")
    else:
        assert not waiter.done.wait(0.5)
    assert not waiter.done.is_set(), "our waiter returned while Java held the lock"


@pytest.mark.parametrize("kind, java_kind, make, suffix, waits_on", KINDS, ids=IDS)
def test_java_holder_wakes_our_waiter_on_unlock(java: JavaDriver, client, raw: Raw, kind, java_kind, make, suffix, waits_on):
    name = f"family:java-holds:{kind}"
    assert java.ok(f"kind {java_kind}") == java_kind
    java.ok(f"lock {name}")
    assert raw.hgetall(name).get(f"{java.holder()}{suffix}") == "1"
    lock = make(client, name)
    assert not lock.acquire(blocking=False)

    waiter = Waiter(client, lock, timeout=60)
    waiter.start()
    blocked(raw, waiter, name, waits_on)
    released = java.call(f"unlock {name}")
    assert released.ok, released.line
    assert waiter.acquired_within(WOKEN_WITHIN) is True
    assert waiter.acquired_ns - released.nanos < MAX_GAP_NS
    assert raw.hgetall(name).get(f"{waiter.holder}{suffix}") == "1"
    assert java.ok(f"tryLock {name}") == "false"
    waiter.finish()
    assert raw.command("EXISTS", name) == 0


@pytest.mark.parametrize("kind, java_kind, make, suffix, waits_on", KINDS, ids=IDS)
def test_our_holder_wakes_a_java_waiter_on_release(java: JavaDriver, client, raw: Raw, kind, java_kind, make, suffix, waits_on):
    name = f"family:we-hold:{kind}"
    assert java.ok(f"kind {java_kind}") == java_kind
    lock = make(client, name)
    assert lock.acquire()  # this thread holds it, watchdog-renewed
    assert raw.hgetall(name).get(f"{client.holder()}{suffix}") == "1"
    assert java.ok(f"tryLock {name}") == "false"

    java.send(f"tryLockWait {name} 20000 -1")
    if kind in ("fair_lock", "non_reentrant_fair_lock"):  # Java's waiter is in the queue
        wait_until(lambda: raw.command("LLEN", f"redisson_lock_queue:{{{name}}}") == 1, what="Java to queue")
    elif waits_on is not None:
        wait_until(lambda: raw.numsub(waits_on(name, "")) > 0, what="Java to subscribe")
    assert not java.has_reply(), "Java returned while we held the lock"
    lock.release()
    got = java.reply(WOKEN_WITHIN + 5)
    assert java.expect_ok(got) == "true"
    assert raw.hgetall(name).get(f"{java.holder()}{suffix}") == "1"
    assert not lock.acquire(blocking=False)
    java.ok(f"unlock {name}")
    assert raw.command("EXISTS", name) == 0


@pytest.mark.parametrize("kind, java_kind, make, suffix, waits_on", KINDS, ids=IDS)
def test_java_force_unlock_reaches_our_lost_signal(java: JavaDriver, fast_client, raw: Raw, kind, java_kind, make, suffix, waits_on):
    name = f"family:forced:{kind}"
    lost = threading.Event()
    kw = {"on_lost": lambda _lock: lost.set()}
    if kind == "write_lock":
        lock = fast_client.read_write_lock(name, **kw).write_lock()
    else:
        lock = getattr(fast_client, kind)(name, **kw)
    assert lock.acquire()  # watchdog lease 0.6 s: renewal notices the loss quickly
    assert java.ok(f"kind {java_kind}") == java_kind
    assert java.ok(f"forceUnlock {name}") == "true"
    assert lost.wait(WOKEN_WITHIN), "our lost signal did not fire after Java's forceUnlock"
    assert lock.lost is True
    with pytest.raises(crosslock.LockLostError):
        lock.release()
    assert raw.command("EXISTS", name) == 0


FAIR_KINDS = [("fair_lock", "fair"), ("non_reentrant_fair_lock", "nonReentrantFair")]


@pytest.mark.parametrize("kind, java_kind", FAIR_KINDS, ids=[k for k, _ in FAIR_KINDS])
def test_a_fair_queue_of_java_and_our_waiters_is_served_in_order(java: JavaDriver, client, other, raw: Raw, kind, java_kind):
    name = f"family:fair-order:{kind}"
    queue = f"redisson_lock_queue:{{{name}}}"
    held = getattr(other, kind)(name)
    assert held.acquire(lease=60)
    first = Waiter(client, getattr(client, kind)(name), timeout=60)
    first.start()
    wait_until(lambda: raw.command("LLEN", queue) == 1, what="our first waiter to queue")
    assert java.ok(f"kind {java_kind}") == java_kind
    java_holder = java.holder()  # asked first: the driver answers nothing while it waits
    java.send(f"tryLockWait {name} 30000 -1")
    wait_until(lambda: raw.command("LLEN", queue) == 2, what="Java to queue")
    last = Waiter(client, getattr(client, kind)(name), timeout=60)
    last.start()
    wait_until(lambda: raw.command("LLEN", queue) == 3, what="our last waiter to queue")
    assert raw.command("LRANGE", queue, 0, -1) == [first.holder, java_holder, last.holder]

    held.release()
    assert first.acquired_within(WOKEN_WITHIN) is True
    assert not java.has_reply() and not last.done.is_set()
    first.finish()
    assert java.expect_ok(java.reply(WOKEN_WITHIN)) == "true"  # Java is next, not our last waiter
    assert not last.done.wait(0.3)
    java.ok(f"unlock {name}")
    assert last.acquired_within(WOKEN_WITHIN) is True
    last.finish()
    assert raw.command("EXISTS", name, queue, f"redisson_lock_timeout:{{{name}}}") == 0


NON_REENTRANT_KINDS = [("non_reentrant_lock", "nonReentrant"), ("non_reentrant_fair_lock", "nonReentrantFair")]


@pytest.mark.parametrize("kind, java_kind", NON_REENTRANT_KINDS, ids=[k for k, _ in NON_REENTRANT_KINDS])
def test_a_non_reentrant_lock_is_refused_to_its_own_holder_on_both_sides(java: JavaDriver, client, raw: Raw, kind, java_kind):
    name = f"family:non-reentrant:{kind}"
    assert java.ok(f"kind {java_kind}") == java_kind
    java.ok(f"lock {name}")
    again = java.call(f"tryLock {name}")
    assert not again.ok and again.error == "IllegalMonitorStateException", again.line
    assert raw.hgetall(name) == {java.holder(): "1"}
    java.ok(f"unlock {name}")

    lock = getattr(client, kind)(name)
    assert lock.acquire()
    with pytest.raises(crosslock.NonReentrantError) as info:
        lock.acquire(timeout=1)
    assert info.value.lock_name == name
    assert raw.hgetall(name) == {client.holder(): "1"}
    lock.release()
    assert raw.command("EXISTS", name) == 0
    if kind == "non_reentrant_fair_lock":  # nothing queued by either side's refusal
        assert raw.command("EXISTS", f"redisson_lock_queue:{{{name}}}", f"redisson_lock_timeout:{{{name}}}") == 0


def test_a_java_writer_and_our_readers_exclude_each_other(java: JavaDriver, client, raw: Raw):
    name = "family:rw"
    rw = client.read_write_lock(name)
    assert java.ok("kind write") == "write"
    java.ok(f"lock {name}")
    reader = Waiter(client, rw.read_lock(), timeout=60)
    reader.start()
    blocked(raw, reader, name, lambda n, _h: rw_channel(n))
    writer_out = java.call(f"unlock {name}")  # a write release wakes every reader
    assert reader.acquired_within(WOKEN_WITHIN) is True
    assert reader.acquired_ns - writer_out.nanos < MAX_GAP_NS
    assert raw.hgetall(name) == {"mode": "read", reader.holder: "1"}

    java.send(f"tryLockWait {name} 20000 -1")  # Java's writer waits for our reader
    wait_until(lambda: raw.numsub(rw_channel(name)) > 0, what="Java's writer to subscribe")
    assert not java.has_reply()
    reader.finish()
    assert java.expect_ok(java.reply(WOKEN_WITHIN)) == "true"
    assert raw.hgetall(name) == {"mode": "write", f"{java.holder()}:write": "1"}
    java.ok(f"unlock {name}")
    assert raw.command("EXISTS", name) == 0


#: Keeps the server busy for ARGV[1] microseconds: the commands that arrive meanwhile queue up.
BUSY = """
local t0 = redis.call('TIME')
repeat
    local t = redis.call('TIME')
until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= tonumber(ARGV[1])
"""


def test_a_java_waiter_about_to_block_does_not_miss_our_write_release(java: JavaDriver, client, raw: Raw):
    """Redisson answers a write release's ``1`` by waking only the Java threads blocked at that
    moment: a thread between its attempt and its wait slept through the release for the PTTL its
    attempt returned, and its ``tryLock`` gave up with the lock free. Our write release follows
    the ``1`` with a ``0``, which Java keeps as a permit.

    The release is made to land in that gap: Java, blocked, is woken by a message of our own and
    the server is kept busy right after it, so Java's next attempt queues behind the busy script
    and our release behind that attempt. The server then answers the attempt (the lock is still
    ours) and runs the release in the same turn: the release's messages reach Java while its
    thread is still on its way from that answer to its wait."""
    assert java.ok("kind write") == "write"
    for i in range(5):  # a round lands in the gap about every other time (on a 2-CPU machine)
        name = f"family:window:{i}"
        lock = client.read_write_lock(name).write_lock()
        assert lock.acquire()  # watchdog-renewed: the PTTL Java is given is up to 30 s
        java.send(f"tryLockWait {name} 20000 -1")
        wait_until(lambda: raw.numsub(rw_channel(name)) > 0, what="Java to subscribe")
        time.sleep(0.3)
        assert not java.has_reply(), "Java got in past our writer"

        raw.send("PUBLISH", rw_channel(name), "0")  # Java wakes and tries again...
        raw.send("EVAL", BUSY, "0", "300000")  # ...into a server busy for 300 ms
        time.sleep(0.15)
        lock.release()  # sent now, answered after Java's attempt
        assert raw.read() == 1 and raw.read() is None
        got = java.reply(WOKEN_WITHIN)  # a missed release: 20 s, then "false"
        assert java.expect_ok(got) == "true", f"round {i}"
        assert raw.hgetall(name) == {"mode": "write", f"{java.holder()}:write": "1"}
        java.ok(f"unlock {name}")
        assert raw.command("EXISTS", name) == 0


def test_our_writer_downgrading_lets_a_waiting_java_reader_in_at_once(java: JavaDriver, client, raw: Raw):
    """A writer that takes the read lock and lets the write lock go (a downgrade) leaves the lock in
    read mode, which readers may share: a Java reader waiting behind it gets in then, not after the
    PTTL of the watchdog lease (30 s; its 20 s tryLock would have given up)."""
    name = "family:downgrade"
    rw = client.read_write_lock(name)
    assert rw.write_lock().acquire()  # watchdog-renewed: the hash lives 30 s at a time
    assert java.ok("kind read") == "read"
    java.send(f"tryLockWait {name} 20000 -1")
    wait_until(lambda: raw.numsub(rw_channel(name)) > 0, what="Java's reader to subscribe")
    time.sleep(0.3)  # past its attempt after subscribing: blocked until a message or the PTTL
    assert not java.has_reply(), "Java's reader got in past our writer"
    assert rw.read_lock().acquire(blocking=False)  # this thread: the writer reads too
    rw.write_lock().release()
    assert java.expect_ok(java.reply(WOKEN_WITHIN)) == "true"
    assert raw.hgetall(name) == {"mode": "read", client.holder(): "1", java.holder(): "1"}
    java.ok(f"unlock {name}")
    rw.read_lock().release()
    assert raw.command("EXISTS", name) == 0


# Every kind (the plain lock and the read lock too): ours, the Java driver's, the Java kind that
# must be refused while ours is held, how to make ours.
EXTEND_KINDS: list[tuple[str, str, str, Make]] = [
    ("lock", "lock", "lock", lambda c, n: c.lock(n)),
    *[(k, jk, jk, make) for k, jk, make, _, _ in KINDS],
    ("read_lock", "read", "write", lambda c, n: c.read_write_lock(n).read_lock()),
]


@pytest.mark.parametrize(
    "kind, java_kind, java_rival, make", EXTEND_KINDS, ids=[k[0] for k in EXTEND_KINDS]
)
def test_redisson_sees_the_lease_our_extend_set(java: JavaDriver, client, raw: Raw, kind, java_kind, java_rival, make):
    name = f"family:extended:{kind}"
    lock = make(client, name)
    assert lock.acquire(lease=0.3)
    lock.extend(5)
    java.ok(f"kind {java_kind}")
    ttl = int(java.ok(f"ttl {name}") or "0")
    assert 3000 < ttl <= 5000, f"Redisson's remainTimeToLive is {ttl} ms"
    time.sleep(0.45)  # past the first lease
    java.ok(f"kind {java_rival}")
    assert java.ok(f"tryLock {name}") == "false", "Redisson took it after the first lease"
    lock.release()
    assert java.ok(f"tryLock {name}") == "true"
    java.ok(f"unlock {name}")
