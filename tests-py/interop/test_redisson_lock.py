"""crosslock's Lock against the real Redisson RLock (Redisson 4.7.0 in a JVM, see tests-java/).

Every test runs against its own throwaway redis-server. "Promptly" is asserted the way DESIGN.md
asks: the holder's lease is long (60 s, or the 30 s watchdog), the waiter is verifiably blocked
(subscribed to ``redisson_lock__channel:{name}``, no answer yet), and it gets the lock within 10 s
of the release — far before any lease could have run out. The Java and Python timestamps are both
CLOCK_MONOTONIC, so the gap between "released" and "acquired" is also checked (< 2 s, generous).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

import crosslock
from java_driver import REPO, JavaDriver
from support import Raw, channel, python_env, wait_until

HERE = Path(__file__).resolve().parent
WOKEN_WITHIN = 10.0  # seconds; every lease involved is >= 30 s
MAX_GAP_NS = 2_000_000_000  # release (one side) -> acquire returned (other side)


class Waiter(threading.Thread):
    """Acquires ``lock`` in its own thread (= its own holder), holds until :meth:`finish`."""

    def __init__(self, client: Any, lock: Any, **acquire: Any) -> None:
        super().__init__(daemon=True, name=f"waiter:{lock}")
        self.client, self.lock, self.kwargs = client, lock, acquire
        self.done = threading.Event()  # acquire returned or raised
        self._finish = threading.Event()
        self.released = threading.Event()
        self.result: Optional[bool] = None
        self.error: Optional[BaseException] = None
        self.release_error: Optional[BaseException] = None
        self.acquired_ns = 0
        self.holder: Optional[str] = None
        self.lost_seen: Optional[bool] = None

    def run(self) -> None:
        self.holder = self.client.holder()
        try:
            self.result = self.lock.acquire(**self.kwargs)
            self.acquired_ns = time.monotonic_ns()
        except BaseException as exc:  # reported by the test
            self.error = exc
        self.done.set()
        if not self.result:
            return
        self._finish.wait(60)
        self.lost_seen = self.lock.lost
        try:
            self.lock.release()
        except BaseException as exc:
            self.release_error = exc
        self.released.set()

    def acquired_within(self, seconds: float) -> bool:
        assert self.done.wait(seconds), f"the waiter did not get the lock within {seconds} s"
        if self.error is not None:
            raise self.error
        return bool(self.result)

    def finish(self) -> None:
        self._finish.set()
        assert self.released.wait(15), "the waiter did not release"
        if self.release_error is not None:
            raise self.release_error


def subscribed(raw: Raw, name: str, who: str) -> None:
    wait_until(lambda: raw.numsub(channel(name)) > 0, 10, what=f"{who} to subscribe to {channel(name)}")


def unsubscribed(raw: Raw, name: str, who: str) -> None:
    wait_until(lambda: raw.numsub(channel(name)) == 0, 10, what=f"{who} to unsubscribe from {channel(name)}")


def subscriber(redis_server, name: str) -> Raw:
    """A plain connection subscribed to the lock's channel."""
    sub = redis_server.raw()
    sub.subscribe(channel(name))
    return sub


def assert_no_message(sub: Raw, name: str) -> None:
    """Nothing was published on the channel since ``sub`` subscribed: replies come in order, so
    PING answers first only if no message is queued before it."""
    reply = sub.command("PING")
    assert reply == ["pong", ""], f"something was published on {channel(name)}: {reply!r}"


# --- Java holds, Python waits -------------------------------------------------------------------


@pytest.mark.parametrize("java_hold", ["lock", "lockLease 60000"], ids=["java-watchdog", "java-lease-60s"])
def test_java_holder_wakes_python_waiter_on_unlock(java: JavaDriver, client, raw: Raw, java_hold: str):
    name = f"interop:java-holds:{java_hold.split()[0]}"
    cmd, *lease = java_hold.split()
    java.ok(" ".join([cmd, name, *lease]))
    java_holder = java.holder()
    assert raw.hgetall(name) == {java_holder: "1"}
    assert raw.command("PTTL", name) > 20_000

    lock = client.lock(name)
    assert lock.locked()
    assert not lock.is_held()
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(timeout=0.05)
    unsubscribed(raw, name, "our client (a timed-out wait leaves no subscription)")

    waiter = Waiter(client, lock, timeout=60)
    waiter.start()
    subscribed(raw, name, "the Python waiter")
    assert not waiter.done.is_set(), "the Python waiter got a lock Java holds"

    before_unlock = time.monotonic_ns()
    unlocked = java.call(f"unlock {name}")
    java.expect_ok(unlocked)
    assert waiter.acquired_within(WOKEN_WITHIN) is True
    assert waiter.acquired_ns >= before_unlock, "the waiter returned before Java unlocked"
    assert waiter.acquired_ns - unlocked.nanos < MAX_GAP_NS, (
        f"woken {(waiter.acquired_ns - unlocked.nanos) / 1e9:.2f} s after Java's unlock"
    )

    assert raw.hgetall(name) == {waiter.holder: "1"}
    assert java.ok(f"isLocked {name}") == "true"
    assert java.ok(f"isHeld {name}") == "false"
    assert java.ok(f"tryLock {name}") == "false"
    waiter.finish()
    assert raw.command("EXISTS", name) == 0
    assert java.ok(f"tryLock {name}") == "true"
    java.ok(f"unlock {name}")


async def test_java_holder_wakes_asyncio_waiter_and_task_reentry_is_respected(java: JavaDriver, client, raw: Raw):
    """The asyncio twin: a task waits for Java's lock, is woken by Java's unlock, then re-enters."""
    name = "interop:java-holds:asyncio"
    java.ok(f"lockLease {name} 60000")
    lock = client.lock(name)
    assert await lock.acquire_async(blocking=False) is False
    java_ok = lambda cmd: asyncio.to_thread(java.ok, cmd)  # noqa: E731 - keep the loop running
    # The driver answers in order on one pipe: the task may be woken (and ask Java) before the
    # thread that sent `unlock` has read its answer, so it waits for that first.
    unlock_answered = asyncio.Event()

    async def task() -> int:
        assert await lock.acquire_async(timeout=60) is True
        acquired_ns = time.monotonic_ns()
        ours = client.holder()  # this task's holder
        assert raw.hgetall(name) == {ours: "1"}
        await unlock_answered.wait()
        async with lock:  # the task re-enters its own lock
            assert await lock.hold_count_async() == 2
            assert raw.hgetall(name) == {ours: "2"}
            assert await java_ok(f"holdCount {name}") == "0"
            assert await java_ok(f"isLocked {name}") == "true"
            assert await java_ok(f"tryLock {name}") == "false"
        assert raw.hgetall(name) == {ours: "1"}  # partial release keeps it
        assert await java_ok(f"tryLock {name}") == "false"
        await lock.release_async()
        return acquired_ns

    waiter = asyncio.create_task(task())
    await asyncio.to_thread(subscribed, raw, name, "the asyncio waiter")
    assert not waiter.done(), "the asyncio waiter got a lock Java holds"
    before_unlock = time.monotonic_ns()
    unlocked = await asyncio.to_thread(java.call, f"unlock {name}")
    unlock_answered.set()
    java.expect_ok(unlocked)
    acquired_ns = await asyncio.wait_for(waiter, WOKEN_WITHIN + 10)
    assert before_unlock <= acquired_ns
    assert acquired_ns - unlocked.nanos < MAX_GAP_NS
    assert raw.command("EXISTS", name) == 0
    assert await java_ok(f"tryLock {name}") == "true"
    await java_ok(f"unlock {name}")


# --- Python holds, Java waits -------------------------------------------------------------------


@pytest.mark.parametrize(
    "our_lease, java_cmd, java_result",
    [
        (60.0, "lock {name}", None),
        (None, "tryLockWait {name} 60000 60000", "true"),
        (60.0, "tryLockWait {name} 60000 -1", "true"),
    ],
    ids=["py-lease-60s/java-lock", "py-watchdog/java-tryLock-wait-lease", "py-lease-60s/java-tryLock-watchdog"],
)
def test_python_holder_wakes_java_waiter_on_release(java: JavaDriver, client, raw: Raw, our_lease, java_cmd, java_result):
    name = "interop:py-holds"
    lock = client.lock(name)
    assert lock.acquire(lease=our_lease)
    ours = client.holder()
    assert raw.hgetall(name) == {ours: "1"}
    assert raw.command("PTTL", name) > 20_000

    assert java.ok(f"isLocked {name}") == "true"
    assert java.ok(f"tryLock {name}") == "false"
    # (no timed tryLock here: Redisson may keep the channel subscribed after a wait limit passes
    # under load, and the check below needs the channel unsubscribed before Java starts waiting)
    assert raw.numsub(channel(name)) == 0

    java.send(java_cmd.format(name=name))
    subscribed(raw, name, "the Java waiter")
    assert not java.has_reply(), "Java got a lock Python holds"

    before_release = time.monotonic_ns()
    lock.release()
    got = java.reply(WOKEN_WITHIN)
    assert java.expect_ok(got) == java_result
    assert got.nanos >= before_release, "Java returned before Python released"
    assert got.nanos - before_release < MAX_GAP_NS, f"woken {(got.nanos - before_release) / 1e9:.2f} s after our release"

    java_holder = java.holder()
    assert raw.hgetall(name) == {java_holder: "1"}
    assert java.ok(f"isHeld {name}") == "true"
    ttl = int(java.ok(f"ttl {name}"))
    assert 0 < ttl <= (60_000 if "60000 60000" in java_cmd else 30_000)
    assert lock.locked() and not lock.is_held()
    java.ok(f"unlock {name}")
    assert not lock.locked()


# --- Reentrancy on either side ------------------------------------------------------------------


def test_java_reentrancy_is_respected_by_python(java: JavaDriver, client, raw: Raw):
    name = "interop:java-reenters"
    java.ok(f"lockLease {name} 60000")
    java.ok(f"lockLease {name} 60000")
    java_holder = java.holder()
    assert java.ok(f"holdCount {name}") == "2"
    assert raw.hgetall(name) == {java_holder: "2"}

    lock = client.lock(name)
    assert lock.locked()
    assert lock.hold_count() == 0
    assert not lock.acquire(blocking=False)

    java.ok(f"unlock {name}")  # partial: 2 -> 1
    assert raw.command("HGET", name, java_holder) == "1"
    assert lock.locked()
    assert not lock.acquire(blocking=False)
    assert java.ok(f"holdCount {name}") == "1"

    java.ok(f"unlock {name}")  # full release
    assert raw.command("EXISTS", name) == 0
    assert not lock.locked()
    assert lock.acquire(blocking=False)
    lock.release()


def test_python_reentrancy_is_respected_by_java(java: JavaDriver, client, raw: Raw):
    name = "interop:py-reenters"
    lock = client.lock(name)
    assert lock.acquire()
    assert lock.acquire()  # re-entry by the same thread
    ours = client.holder()
    assert lock.hold_count() == 2
    assert raw.hgetall(name) == {ours: "2"}

    assert java.ok(f"holdCount {name}") == "0"  # not Java's hold
    assert java.ok(f"isLocked {name}") == "true"
    assert java.ok(f"isHeld {name}") == "false"
    assert java.ok(f"tryLock {name}") == "false"

    lock.release()  # partial: 2 -> 1
    assert lock.hold_count() == 1
    assert raw.hgetall(name) == {ours: "1"}
    assert java.ok(f"isLocked {name}") == "true"
    assert java.ok(f"tryLock {name}") == "false"

    lock.release()
    assert raw.command("EXISTS", name) == 0
    assert java.ok(f"tryLock {name}") == "true"
    assert java.ok(f"holdCount {name}") == "1"
    java.ok(f"unlock {name}")


# --- forceUnlock, foreign unlock and release ----------------------------------------------------


def test_java_force_unlock_signals_our_holder_and_lets_our_waiter_in(java: JavaDriver, fast_client, raw: Raw):
    # fast_client: watchdog lease 0.6 s, renewed every 0.2 s, so renewal notices the loss quickly
    name = "interop:force-unlocked"
    lost = threading.Event()
    lost_locks: list = []

    def on_lost(lock: Any) -> None:
        lost_locks.append(lock)
        lost.set()

    lock = fast_client.lock(name, on_lost=on_lost)
    assert lock.acquire()  # this thread: the holder, watchdog-renewed
    ours = fast_client.holder()
    assert raw.hgetall(name) == {ours: "1"}

    waiter = Waiter(fast_client, lock, timeout=60)  # another thread: another owner
    waiter.start()
    subscribed(raw, name, "our waiter")
    assert not waiter.done.is_set()

    assert java.ok(f"forceUnlock {name}") == "true"
    assert lost.wait(WOKEN_WITHIN), "on_lost did not run after Java's forceUnlock"
    assert lost_locks == [lock]
    assert lock.lost is True
    assert waiter.acquired_within(WOKEN_WITHIN) is True
    assert raw.hgetall(name) == {waiter.holder: "1"}

    with pytest.raises(crosslock.LockLostError) as info:
        lock.release()
    assert info.value.code == "LOCK_LOST"
    assert info.value.lock_name == name
    assert name in str(info.value)

    # the waiter's own hold is not lost, and stays renewed past several watchdog periods
    time.sleep(1.5)
    assert raw.hgetall(name) == {waiter.holder: "1"}
    assert lost_locks == [lock]
    waiter.finish()
    assert waiter.lost_seen is False
    assert raw.command("EXISTS", name) == 0


@pytest.mark.parametrize("our_lease", [60.0, None], ids=["py-lease-60s", "py-watchdog"])
def test_java_unlock_of_our_lock_fails_and_changes_nothing(java: JavaDriver, client, raw: Raw, redis_server, our_lease):
    name = "interop:py-holds-java-unlocks"
    lock = client.lock(name)
    assert lock.acquire(lease=our_lease)
    before = raw.hgetall(name)
    pttl_before = raw.command("PTTL", name)
    sub = subscriber(redis_server, name)
    try:
        got = java.call(f"unlock {name}")
        assert not got.ok
        assert got.error == "IllegalMonitorStateException"
        assert f"node id: {java.client_id}" in got.message
        pttl_after = raw.command("PTTL", name)
        assert raw.hgetall(name) == before
        assert pttl_before - 5_000 < pttl_after <= pttl_before + (0 if our_lease else 30_000)
        assert_no_message(sub, name)
    finally:
        sub.close()
    assert java.ok(f"isHeld {name}") == "false"
    assert lock.is_held() and lock.hold_count() == 1
    lock.release()
    assert raw.command("EXISTS", name) == 0


@pytest.mark.parametrize("java_hold", ["lockLease {name} 60000", "lock {name}"], ids=["java-lease-60s", "java-watchdog"])
def test_our_release_of_java_lock_fails_and_changes_nothing(java: JavaDriver, client, raw: Raw, redis_server, java_hold):
    name = "interop:java-holds-py-releases"
    java.ok(java_hold.format(name=name))
    java_holder = java.holder()
    before = raw.hgetall(name)
    assert before == {java_holder: "1"}
    pttl_before = raw.command("PTTL", name)
    lock = client.lock(name)
    sub = subscriber(redis_server, name)
    try:
        with pytest.raises(crosslock.NotHeldError) as info:
            lock.release()
        assert isinstance(info.value, RuntimeError)
        assert info.value.code == "NOT_HELD"
        assert info.value.lock_name == name
        assert name in str(info.value)
        pttl_after = raw.command("PTTL", name)
        assert raw.hgetall(name) == before
        assert pttl_before - 5_000 < pttl_after <= pttl_before + (0 if "lockLease" in java_hold else 30_000)
        assert_no_message(sub, name)
    finally:
        sub.close()
    assert java.ok(f"isHeld {name}") == "true"
    assert java.ok(f"holdCount {name}") == "1"
    java.ok(f"unlock {name}")
    assert raw.command("EXISTS", name) == 0


# --- Mixed mutual exclusion: Java, Python and Node processes on one counter ---------------------

JAVA_PROCS = PY_PROCS = NODE_PROCS = 2
ITERATIONS = 100
# Every process's watchdog lease here. Redisson wakes its waiters on a write lock's release ("1")
# by giving a permit to each Java thread already blocked at that moment: a thread between its
# attempt and its wait misses that release and sleeps for the PTTL its attempt returned. With the
# usual 30 s lease two such misses outlast the test's patience; with 5 s they cost seconds.
WATCHDOG_MS = 5000


# Our kind (as tests-py/cross names it) and the Java driver's.
KINDS = [("lock", "lock"), ("fair_lock", "fair"), ("spin_lock", "spin"), ("fenced_lock", "fenced"),
         ("non_reentrant_lock", "nonReentrant"), ("write_lock", "write")]


@pytest.mark.parametrize("kind, java_kind", KINDS, ids=[k for k, _ in KINDS])
def test_java_python_node_processes_share_one_counter_exactly(java_built, redis_url, raw: Raw, kind, java_kind):
    name, key = f"interop:counter-{kind}", f"interop:counter-{kind}:value"
    iterations = ITERATIONS if kind == "lock" else ITERATIONS // 2
    javas: list[JavaDriver] = []
    others: list[subprocess.Popen] = []
    try:
        for _ in range(JAVA_PROCS):
            javas.append(JavaDriver.start())
        for j in javas:
            j.connect(redis_url, WATCHDOG_MS)
            assert j.ok(f"kind {java_kind}") == java_kind
        env = {**python_env(), "CROSSLOCK_WATCHDOG_MS": str(WATCHDOG_MS)}
        for _ in range(PY_PROCS):
            others.append(subprocess.Popen(
                [sys.executable, str(HERE / "counter_worker.py"), redis_url, name, key, str(iterations), kind],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            ))
        for _ in range(NODE_PROCS):
            others.append(subprocess.Popen(
                ["node", str(HERE / "counter_worker.mjs"), redis_url, name, key, str(iterations), kind],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO), env=env,
            ))
        for p in others:  # each prints READY once connected, then waits for "go"
            line = _readline(p, 30)
            assert line == "READY", f"worker {p.args[:2]} said {line!r}"

        for j in javas:
            j.send(f"counter {name} {key} {iterations}")
        for p in others:
            p.stdin.write("go\n")
            p.stdin.close()

        for j in javas:
            assert j.expect_ok(j.reply(60)) == str(iterations)
        for p in others:
            assert _readline(p, 60) == f"DONE {iterations}"
            assert p.wait(15) == 0

        total = (JAVA_PROCS + PY_PROCS + NODE_PROCS) * iterations
        assert raw.command("GET", key) == str(total), "increments were lost: two holders overlapped"
        assert raw.command("EXISTS", name) == 0
    finally:
        for j in javas:
            j.close()
        for p in others:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """One stdout line of ``proc`` within ``timeout`` s (reads in a helper thread)."""
    box: list = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        proc.kill()
        raise AssertionError(f"{proc.args[:2]} printed nothing within {timeout} s")
    line = box[0].strip()
    if not line:
        raise AssertionError(f"{proc.args[:2]} exited (code {proc.wait(10)}) without output")
    return line
