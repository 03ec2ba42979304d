"""Semaphore, PermitExpirableSemaphore and CountDownLatch against the real Redisson (4.7.0, in a
JVM, see tests-java/), both directions: the counts each side sees stay exact, a waiter on one side
is woken by the other side's release or count-down (every wait below is bounded far above the time
a wake-up takes, and no lease runs out meanwhile), and a permit id travels between languages.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any, Callable

import pytest

import crosslock
from java_driver import REPO, JavaDriver
from support import Raw, wait_until

WITHIN = 10.0  # seconds a wake-up may take before the test fails


def sem_channel(name: str) -> str:
    return f"redisson_sc:{{{name}}}"


def latch_channel(name: str) -> str:
    return f"redisson_countdownlatch__channel__{{{name}}}"


class Background(threading.Thread):
    """Runs ``call`` in its own thread and keeps what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call, self.result, self.error = call, None, None
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # reported by the test
            self.error = exc
        self.done.set()

    def value(self, within: float = WITHIN) -> Any:
        assert self.done.wait(within), f"no answer within {within} s"
        if self.error is not None:
            raise self.error
        return self.result


def test_semaphore_permits_are_shared_and_releases_wake_the_other_side(java: JavaDriver, client, raw: Raw):
    name = "sync:sem"
    sem = client.semaphore(name)
    assert java.ok(f"semTrySet {name} 5") == "true"
    assert sem.try_set_permits(9) is False  # already set, by Java
    assert sem.available_permits() == 5
    assert sem.acquire(3, timeout=1)
    assert java.ok(f"semAvailable {name}") == "2"
    assert raw.command("GET", name) == "2"

    # Java waits for 3; our release of 3 wakes it.
    java.send(f"semAcquire {name} 3 20000")
    wait_until(lambda: raw.numsub(sem_channel(name)) > 0, what="Java to wait on the semaphore")
    assert not java.has_reply()
    sem.release(3)
    assert java.expect_ok(java.reply(WITHIN)) == "true"
    assert sem.available_permits() == 2

    # We wait for 3; Java's release of 3 wakes us.
    waiting = Background(lambda: sem.acquire(3, timeout=20))
    wait_until(lambda: raw.numsub(sem_channel(name)) > 0, what="our acquire to wait")
    assert not waiting.done.wait(0.2)
    java.ok(f"semRelease {name} 3")
    assert waiting.value()
    assert java.ok(f"semAvailable {name}") == "2"
    sem.release(3)
    assert java.ok(f"semAvailable {name}") == "5"
    assert raw.command("GET", name) == "5"


def test_release_if_exists_agrees_with_redisson_and_wakes_the_other_side(java: JavaDriver, client, raw: Raw):
    name = "sync:sem-if-exists"
    sem = client.semaphore(name)
    # Absent: neither side creates it.
    assert java.ok(f"semReleaseIfExists {name} 2") == "false"
    assert sem.release_if_exists(2) is False
    assert raw.command("EXISTS", name) == 0
    assert java.ok(f"semTrySet {name} 0") == "true"

    # Java waits for 2; our release_if_exists wakes it.
    java.send(f"semAcquire {name} 2 20000")
    wait_until(lambda: raw.numsub(sem_channel(name)) > 0, what="Java to wait on the semaphore")
    assert not java.has_reply()
    assert sem.release_if_exists(2) is True
    assert java.expect_ok(java.reply(WITHIN)) == "true"

    # We wait for 2; Java's releaseIfExists wakes us.
    waiting = Background(lambda: sem.acquire(2, timeout=20))
    wait_until(lambda: raw.numsub(sem_channel(name)) > 0, what="our acquire to wait")
    assert not waiting.done.wait(0.2)
    assert java.ok(f"semReleaseIfExists {name} 3") == "true"
    assert waiting.value()
    assert raw.command("GET", name) == "1"
    assert sem.delete() is True
    assert java.ok(f"semReleaseIfExists {name} 1") == "false"
    assert raw.command("EXISTS", name) == 0


def test_a_permit_id_travels_between_java_and_us_and_a_released_id_is_refused_on_both_sides(
    java: JavaDriver, client, raw: Raw
):
    name = "sync:pes"
    sem = client.permit_expirable_semaphore(name)
    assert java.ok(f"pesTrySet {name} 2") == "true"
    java_id = java.ok(f"pesAcquire {name} 0 60000")
    assert java_id is not None and len(java_id) == 32
    assert sem.available_permits() == 1
    assert sem.remaining_lease(java_id) is not None  # we see Java's permit and its lease
    sem.release(java_id)  # a Java permit, released by us
    assert java.ok(f"pesAvailable {name}") == "2"
    with pytest.raises(crosslock.NotHeldError):
        sem.release(java_id)
    assert java.ok(f"pesTryRelease {name} {java_id}") == "false"

    our_id = sem.acquire(timeout=1, lease=60)
    assert our_id is not None and len(our_id) == 32
    assert java.ok(f"pesAvailable {name}") == "1"
    assert java.ok(f"pesUpdateLease {name} {our_id} 120000") == "true"
    assert sem.remaining_lease(our_id) > 60
    java.ok(f"pesRelease {name} {our_id}")  # our permit, released by Java
    assert sem.available_permits() == 2
    assert sem.try_release(our_id) is False
    assert java.ok(f"pesTryRelease {name} {our_id}") == "false"
    assert raw.command("ZCARD", f"{{{name}}}:timeout") == 0


def test_expired_java_permits_come_back_to_our_waiter_and_our_release_wakes_java(java: JavaDriver, client, raw: Raw):
    name = "sync:pes-expiry"
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1) is True
    assert java.ok(f"pesAcquire {name} 0 700") is not None  # a 0.7 s lease, never released
    assert sem.acquire(blocking=False) is None
    our_id = sem.acquire(timeout=20, lease=60)  # reclaimed once Java's lease runs out
    assert our_id is not None
    assert raw.command("ZCARD", f"{{{name}}}:timeout") == 1

    java.send(f"pesAcquire {name} 20000 60000")  # Java waits for our permit
    wait_until(lambda: raw.numsub(sem_channel(name)) > 0, what="Java to wait on the semaphore")
    assert not java.has_reply()
    sem.release(our_id)
    java_id = java.expect_ok(java.reply(WITHIN))
    assert java_id not in (None, "null") and java_id != our_id
    java.ok(f"pesRelease {name} {java_id}")
    assert sem.available_permits() == 1


def test_a_latch_counted_down_by_one_side_opens_the_other_sides_waiters(java: JavaDriver, client, raw: Raw):
    name = "sync:latch"
    latch = client.count_down_latch(name)
    assert latch.try_set_count(2) is True
    assert java.ok(f"latchTrySet {name} 5") == "false"  # already counting
    assert java.ok(f"latchCount {name}") == "2"
    java.send(f"latchAwait {name} 20000")
    wait_until(lambda: raw.numsub(latch_channel(name)) > 0, what="Java to await the latch")
    latch.count_down()
    assert not java.has_reply()
    latch.count_down()
    assert java.expect_ok(java.reply(WITHIN)) == "true"
    assert raw.command("EXISTS", name) == 0

    assert java.ok(f"latchTrySet {name} 2") == "true"
    assert latch.count() == 2
    waiting = Background(lambda: latch.wait(timeout=20))
    wait_until(lambda: raw.numsub(latch_channel(name)) > 0, what="our wait to subscribe")
    java.ok(f"latchCountDown {name}")
    assert not waiting.done.wait(0.2)
    java.ok(f"latchCountDown {name}")
    assert waiting.value()
    assert latch.count() == 0 and java.ok(f"latchCount {name}") == "0"


NODE_SEMAPHORE_WORKER = """
const { connect } = require(process.argv[1])
const [url, name, n] = process.argv.slice(2)
;(async () => {
  const client = await connect(url)
  const sem = client.semaphore(name)
  for (let i = 0; i < Number(n); i++) {
    await sem.acquire({ wait: 30000 })
    await sem.release()
  }
  await client.close()
  console.log('DONE')
})().catch((e) => { console.error(e); process.exit(1) })
"""


def test_java_python_and_node_share_one_semaphore_and_its_count_stays_exact(java: JavaDriver, client, redis_server, url):
    name, permits, rounds = "sync:shared", 2, 40
    sem = client.semaphore(name)
    assert sem.try_set_permits(permits) is True
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:  # the count as Redis has it, throughout
        with redis_server.raw() as r:
            while not stop.is_set():
                seen.append(int(r.command("GET", name)))

    holders = {"now": 0, "most": 0}
    lock = threading.Lock()

    def ours() -> None:  # Python threads, counting how many of them hold a permit at once
        for _ in range(rounds):
            assert sem.acquire(timeout=30)
            with lock:
                holders["now"] += 1
                holders["most"] = max(holders["most"], holders["now"])
            with lock:
                holders["now"] -= 1
            sem.release()

    node = subprocess.Popen(
        ["node", "-e", NODE_SEMAPHORE_WORKER, str(REPO), url, name, str(rounds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    for _ in range(rounds):
        java.send(f"semAcquire {name} 1 30000")
        java.send(f"semRelease {name} 1")
    threads = [threading.Thread(target=sample)] + [threading.Thread(target=ours) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(rounds):
            assert java.expect_ok(java.reply(60)) == "true"
            java.expect_ok(java.reply(60))
        out, err = node.communicate(timeout=60)
        assert node.returncode == 0 and out.strip() == "DONE", err
        for t in threads[1:]:
            t.join(60)
    finally:
        stop.set()
        threads[0].join(10)
        if node.poll() is None:
            node.kill()
    assert seen and min(seen) >= 0 and max(seen) <= permits, (min(seen), max(seen))
    assert holders["most"] <= permits
    assert sem.available_permits() == permits and java.ok(f"semAvailable {name}") == str(permits)
