"""Python, Node and Java (Redisson) processes sharing the other locks of the family: a fair lock's
queue order across languages (with a waiter killed while queued), read locks held at once by all
three languages (the Java reader leaving first), fencing tokens taken in turn by all three, and
Python and Node processes cutting waits short at random on every kind at once, and on both
kinds of semaphore.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

import crosslock
from support import Raw, RedisServer, wait_until

from test_cross_language import Worker, workers  # noqa: F401  (the fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from java_driver import JavaDriver, ensure_built  # noqa: E402


@pytest.fixture
def java(redis_server: RedisServer) -> Iterator[JavaDriver]:
    """A Redisson client in its own JVM on this test's server."""
    ensure_built()
    driver = JavaDriver.start()
    try:
        driver.connect(redis_server.url)
        yield driver
    finally:
        driver.close()


def test_fair_lock_serves_six_processes_of_two_languages_in_queue_order_past_a_killed_waiter(
    redis_server: RedisServer, raw: Raw, workers  # noqa: F811
) -> None:
    name = "cross:fair"
    queue = "redisson_lock_queue:{cross:fair}"
    # Waiters without a wait limit get the client's fair wait as their deadline step: a short one,
    # so the waiter killed while queued is skipped about 2 s after its last try.
    env = {"CROSSLOCK_KIND": "fair_lock", "CROSSLOCK_FAIR_WAIT": "2", "CROSSLOCK_WAIT": "inf"}
    holder = workers("python", redis_server.url, "hold", name, env=env)
    holder.expect("READY")
    holder.expect("HELD")
    waiters: list[Worker] = []
    for i, lang in enumerate(["python", "node", "python", "node", "python", "node"]):
        w = workers(lang, redis_server.url, "wait", name, env=env)
        w.expect("READY")
        wait_until(lambda: raw.command("LLEN", queue) == i + 1, what=f"waiter {i} ({lang}) to queue")
        waiters.append(w)
    killed = waiters.pop(2)  # the third in line, a Python process, dies while queued
    killed.kill()
    holder.send_line()
    holder.expect("RELEASED")
    acquired = [(int(w.expect("ACQUIRED", timeout=30)), i) for i, w in enumerate(waiters)]
    for w in waiters:
        w.finish()
    holder.finish()
    order = [i for _, i in sorted(acquired)]
    assert order == list(range(5)), f"served out of queue order: {order}"
    assert raw.command("EXISTS", name) == 0
    wait_until(lambda: raw.command("EXISTS", queue) == 0, what="the dead waiter to be purged")
    assert raw.command("ZCARD", "redisson_lock_timeout:{cross:fair}") == 0


def test_python_java_and_node_hold_the_read_lock_at_once_and_a_writer_waits_for_the_last(
    redis_server: RedisServer, raw: Raw, workers, java: JavaDriver  # noqa: F811
) -> None:
    name = "cross:rw"
    readers = [workers(lang, redis_server.url, "hold", name, env={"CROSSLOCK_KIND": "read_lock"}) for lang in ["python", "node"]]
    for r in readers:
        r.expect("READY")
    held = [int(r.expect("HELD")) for r in readers]
    assert java.ok("kind read") == "read"
    held.append(java.call(f"lock {name}").nanos)
    # All three hold it now: none released before the others acquired.
    fields = raw.hgetall(name)
    assert fields.pop("mode") == "read" and len(fields) == 3, fields
    writer = workers("node", redis_server.url, "wait", name, env={"CROSSLOCK_KIND": "write_lock"})
    writer.expect("READY")
    wait_until(lambda: raw.numsub("redisson_rwlock:{cross:rw}") >= 1, what="the writer to wait")

    # The Java reader leaves first: the other two keep their holds, their timeout keys and a TTL.
    first_release = java.call(f"unlock {name}").nanos
    left = raw.hgetall(name)
    assert left.pop("mode") == "read" and len(left) == 2 and set(left) < set(fields), left
    for reader in left:
        assert raw.command("EXISTS", f"{{{name}}}:{reader}:rwlock_timeout:1") == 1, reader
    assert raw.command("PTTL", name) > 0
    readers[0].send_line()
    readers[0].expect("RELEASED")
    assert raw.hgetall(name).get("mode") == "read", "one reader left, the last still reads"
    readers[1].send_line()
    last_release = int(readers[1].expect("RELEASED"))
    written = int(writer.expect("ACQUIRED"))
    assert max(held) < first_release, "the readers did not overlap"
    assert written >= last_release, "the writer got in while a reader held the lock"
    for w in [*readers, writer]:
        w.finish()
    assert raw.command("EXISTS", name) == 0


@pytest.mark.parametrize("rounds", [8])
def test_fencing_tokens_from_python_node_and_java_strictly_increase_in_time_order(
    redis_server: RedisServer, raw: Raw, workers, java: JavaDriver, rounds: int  # noqa: F811
) -> None:
    name = "cross:fenced"
    procs = [workers(lang, redis_server.url, "tokens", name, str(rounds)) for lang in ["python", "node", "python", "node"]]
    assert java.ok("kind fenced") == "fenced"
    for _ in range(rounds):  # Redisson takes its tokens meanwhile, one command after the other
        java.send(f"token {name}")
        java.send(f"unlock {name}")
    java_tokens = []
    for _ in range(rounds):
        taken = java.reply(60)
        java_tokens.append((taken.nanos, int(java.expect_ok(taken))))
        java.expect_ok(java.reply(60))
    for p in procs:
        p.expect("DONE", timeout=60)
        p.finish()
    tokens = sorted(
        [(int(ns), int(token))
         for p in procs
         for line in p.lines
         if line.startswith("TOKEN ")
         for ns, token in [line.split()[1:3]]]
        + java_tokens
    )
    seen = [t for _, t in tokens]
    assert len(seen) == 5 * rounds
    assert seen == sorted(seen) and len(set(seen)) == len(seen), f"tokens out of order: {seen}"
    assert int(raw.command("GET", "redisson_lock_token:{cross:fenced}")) == seen[-1]


def two_by_two(workers, url: str, mode: str, name: str, bad: str) -> None:  # type: ignore[no-untyped-def]
    """Runs two Python and two Node workers in `mode` on `name` for 4 s at once; each must end
    with "DONE <ok> <bad>", having got in at least once and never seen `bad`."""
    started = [workers(lang, url, mode, name, "4") for lang in ("python", "node", "python", "node")]
    for w in started:
        w.expect("READY")
    for w in started:
        ok, wrong = (int(n) for n in w.expect("DONE", timeout=60).split())
        assert wrong == 0, f"{w.lang} worker {bad} {wrong} times (and not {ok} times)"
        assert ok > 0, f"{w.lang} worker never got in"
        w.finish()


def test_python_and_node_processes_cutting_waits_short_on_every_kind_never_overlap_or_leave_anything(
    redis_server: RedisServer, raw: Raw, workers  # noqa: F811
) -> None:
    """Two Python processes (threads and asyncio tasks) and two Node processes (tasks, some of
    them one owner throughout) take a lock, a fair lock and a read-write lock at random for a few
    seconds, each wait cut short at random by a timeout, a cancel or an abort: the moments where a
    win is given back in the background. Inside, each counts itself in Redis; no writer ever
    sees anyone else in, no worker fails (a task's read cut short and then its write must not be
    refused as an upgrade), and nothing is left in Redis afterwards: no hold, no queue entry, no
    reader's timeout key."""
    name = "cross:chaos"
    two_by_two(workers, redis_server.url, "chaos", name, bad="saw someone else inside")

    def left() -> list[str]:
        keys = raw.command("KEYS", "*")
        return sorted(k for k in keys if not k.startswith(f"{name}:") or not k.endswith((":w", ":r")))

    # Every worker closed its client, which released its holds; its cut-short waits were cleaned
    # up (a fair-lock waiter leaves the queue, a reader's timeout key goes with its hold).
    wait_until(lambda: left() == [], timeout=10, what=f"nothing left of {name} in Redis")
    counters = raw.command("KEYS", f"{name}:*:[wr]")
    assert counters and all(raw.command("GET", k) == "0" for k in counters), counters


def test_python_and_node_processes_cutting_permit_waits_short_never_exceed_the_permits_nor_lose_one(
    redis_server: RedisServer, raw: Raw, workers  # noqa: F811
) -> None:
    """As above, on a semaphore of 3 permits (taking 1 or 2 at a time) and a permit-expirable
    semaphore of 2: each wait cut short at random, where a permit won in the same instant is given
    back in the background. No more permits are ever in use than there are, and afterwards every
    permit is back: none lost to a cancelled wait, none added by a give-back counted twice."""
    name = "cross:permits"
    with crosslock.connect(redis_server.url) as client:
        sem, pes = client.semaphore(f"{name}:s"), client.permit_expirable_semaphore(f"{name}:p")
        assert sem.try_set_permits(3) and pes.try_set_permits(2)
        two_by_two(workers, redis_server.url, "permits", name, bad="saw more permits in use than there are")
        assert sem.available_permits() == 3
        assert pes.available_permits() == 2
    assert raw.command("ZCARD", f"{{{name}:p}}:timeout") == 0, "a permit-expirable permit is still out"
    assert all(raw.command("GET", f"{name}:{part}:used") == "0" for part in "sp")
