"""On a Redis Cluster, from Python: a ``redis+cluster://`` client runs every object's scripts on the
master owning its slot, waiters use sharded pub/sub (Redis 7) like Redisson's default, the watchdog
renews locks spread over every slot, names that would split an object over two slots are refused,
and a failover (``CLUSTER FAILOVER``, kill -9 of a master) is followed: waiters keep waiting and
acquire on the new master, a hold that reached the replica is kept, a hold that did not is reported
lost, and no call hangs past its limit."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Iterator

import pytest

import crosslock
from support import (Cluster, Raw, a_failover_keeps_replicated_holds_and_reports_the_others_lost, eight_workers_exclude_each_other,
                     killing_the_master_is_survived_by_waiters, release_wakes_every_kind, wait_until)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One cluster for the tests that do not fail it over."""
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def fresh_cluster() -> Iterator[Cluster]:
    """A cluster of its own, for a test that fails it over."""
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def connect(cluster: Cluster, url_suffix: str = "", **options: float) -> crosslock.Client:
    options.setdefault("connect_timeout", 8.0)
    return crosslock.connect(cluster.url + url_suffix, **options)


def test_fifty_locks_land_on_the_masters_owning_their_slots(cluster):
    names = [f"py:cluster:spread:{i}" for i in range(50)]
    with connect(cluster) as client:
        assert client.address.startswith("cluster via 127.0.0.1:")
        locks = [client.lock(n) for n in names]
        for lock in locks:
            lock.acquire()
        for name in names:
            with cluster.raw_for(name) as r:
                assert len(r.hgetall(name)) == 1, name
        assert {cluster.master_of(n) for n in names} == set(cluster.masters())
        for lock in locks:
            lock.release()
        for name in names:
            with cluster.raw_for(name) as r:
                assert r.command("EXISTS", name) == 0, name


def test_eight_workers_exclude_each_other_exactly(cluster):
    clients = [connect(cluster), connect(cluster)]
    try:
        eight_workers_exclude_each_other(clients, "py:cluster:counter")
    finally:
        for c in clients:
            c.close()


def subscribers(cluster: Cluster, channel: str) -> tuple[int, int]:
    """(sharded subscribers on the master owning ``channel``, plain subscribers on every master)."""
    with cluster.raw_for(channel) as r:
        sharded = r.command("PUBSUB", "SHARDNUMSUB", channel)[1]
    plain = 0
    for port in cluster.masters():
        with Raw(port) as r:
            plain += r.command("PUBSUB", "NUMSUB", channel)[1]
    return sharded, plain


def test_a_release_wakes_the_waiter_of_every_kind_through_sharded_pubsub(cluster):
    def subscribed(channel: str | None) -> None:
        if channel is None:  # the fair lock: each waiter has a channel of its own
            time.sleep(0.2)
        else:
            # Redis 7 everywhere: SSUBSCRIBE on the node owning the channel, as Redisson's default
            # (AUTO) does.
            wait_until(lambda: subscribers(cluster, channel) == (1, 0), timeout=5, what=channel)

    a, b = connect(cluster), connect(cluster)
    try:
        release_wakes_every_kind(a, b, "py:cluster:wake", subscribed)
    finally:
        a.close()
        b.close()


def test_plain_pubsub_when_asked(cluster):
    with connect(cluster, "?sharded_pubsub=off") as a, connect(cluster, "?sharded_pubsub=off") as b:
        held = a.lock("py:cluster:plain")
        assert held.acquire(lease=120)
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(b.lock("py:cluster:plain").acquire(timeout=20)))
        waiter.start()
        wait_until(lambda: subscribers(cluster, "redisson_lock__channel:{py:cluster:plain}") == (0, 1), timeout=5)
        held.release()
        waiter.join(25)
        assert got == [True]


def test_the_watchdog_renews_locks_in_every_slot_and_reports_a_deleted_one_lost(cluster):
    fired: list[str] = []
    names = [f"py:cluster:watchdog:{i}" for i in range(50)]
    with connect(cluster, watchdog_timeout=0.9) as client:
        locks = [client.lock(n, on_lost=lambda lock: fired.append(lock.name)) for n in names]
        for lock in locks:
            lock.acquire()
        time.sleep(2.5)
        for name, lock in zip(names, locks):
            assert lock.is_held() and not lock.lost, name
            with cluster.raw_for(name) as r:
                assert r.command("PTTL", name) > 0, name
        with cluster.raw_for(names[17]) as r:
            r.command("DEL", names[17])
        wait_until(lambda: fired, timeout=5, what="the lost signal")
        assert fired == [names[17]]
        assert locks[17].lost


def test_names_that_would_split_an_object_over_two_slots_are_refused(cluster):
    with connect(cluster) as client:
        for name in ("a{b", "a{}b", "a}b"):
            with pytest.raises(crosslock.InvalidArgumentError, match="hash slots"):
                client.lock(name)
        with pytest.raises(crosslock.InvalidArgumentError, match="hash slots"):
            client.count_down_latch("{orders}:7")
        with client.fair_lock("{orders}:42"):
            pass
    with pytest.raises(crosslock.InvalidArgumentError, match="database 0"):
        crosslock.connect(f"redis+cluster://127.0.0.1:{cluster.nodes[0].port}/3")
    started = time.monotonic()
    with pytest.raises(crosslock.RedisUnavailableError):
        crosslock.connect("redis+cluster://127.0.0.1:1", connect_timeout=0.5)
    assert time.monotonic() - started < 5


def test_cluster_failover_keeps_replicated_holds_and_reports_the_others_lost(fresh_cluster):
    a_failover_keeps_replicated_holds_and_reports_the_others_lost(fresh_cluster)


def test_killing_a_master_is_survived_by_waiters(fresh_cluster):
    killing_the_master_is_survived_by_waiters(fresh_cluster)


def connections(port: int) -> dict[str, str]:
    """The node's client connections (id: last command), but for the one asking."""
    with Raw(port) as r:
        return r.clients()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_calls_go_over_a_lane_to_the_master_of_their_slot_and_follow_the_slot_when_it_moves(
    fresh_cluster: Cluster, flavour: str
) -> None:
    """Calls in quick succession make their round trips over a connection of their own (the
    calling thread's, or the event loop's) to the master serving the lock's slot, and to no other
    master. When the slot moves to another master, that lane's reply is a redirect: the call goes
    the routed way (no error reaches the caller, the lock stays exact), and the next calls get a
    lane to the new master."""
    cluster = fresh_cluster
    name = f"py:cluster:lane:{flavour}"
    client = connect(cluster)
    lock = client.lock(name)
    loop = asyncio.new_event_loop()

    # Each call the flavour's way, so that only its own kind of lane opens; an asyncio owner is
    # its task, so each step runs as one task.
    def pairs(n: int) -> None:
        if flavour == "sync":
            for _ in range(n):
                assert lock.acquire(timeout=5)
                assert lock.hold_count() == 1
                lock.release()
        else:

            async def main() -> None:
                for _ in range(n):
                    assert await lock.acquire_async(timeout=5)
                    assert await lock.hold_count_async() == 1
                    await lock.release_async()

            loop.run_until_complete(main())

    def moved_while_held(to: int) -> None:
        """Takes the lock, moves its slot to ``to``, and checks and releases the hold there: the
        first call after the move goes over the old master's lane and is redirected."""

        def move() -> None:
            cluster.move_slot(name, to)
            with Raw(to) as r:
                assert len(r.hgetall(name)) == 1, "the hold moved with its slot"

        if flavour == "sync":
            assert lock.acquire(timeout=5)
            move()
            assert lock.hold_count() == 1
            lock.release()
        else:

            async def main() -> None:
                assert await lock.acquire_async(timeout=5)
                move()  # blocks the loop, which has nothing else to do meanwhile
                assert await lock.hold_count_async() == 1
                await lock.release_async()

            loop.run_until_complete(main())

    def a_lane_only_to(port: int, since: dict[int, dict[str, str]]) -> bool:
        """Runs pairs; whether they went over one connection opened on ``port`` since ``since``
        (a server's own ``MIGRATE`` connection aside), none opened on another master."""
        pairs(30)
        opened = {
            p: {i for i, cmd in connections(p).items() if i not in since[p] and cmd != "restore-asking"}
            for p in cluster.masters()
        }
        assert all(not ids for p, ids in opened.items() if p != port), f"connections opened: {opened}"
        return len(opened[port]) == 1

    def snapshot() -> dict[int, dict[str, str]]:
        return {p: connections(p) for p in cluster.masters()}

    try:
        first = cluster.master_of(name)
        # The first calls go the routed way while the slot map is read and the lane opens.
        start = snapshot()
        wait_until(lambda: a_lane_only_to(first, start), timeout=15, interval=0.05,
                   what="a lane to the slot's master")
        # Established: the next calls use it and open nothing anywhere.
        before = snapshot()
        pairs(100)
        assert snapshot().keys() == before.keys()
        assert all(set(connections(p)) <= set(before[p]) for p in before), "the calls opened connections"

        second = next(p for p in cluster.masters() if p != first)
        before = snapshot()
        moved_while_held(second)
        wait_until(lambda: a_lane_only_to(second, before), timeout=15, interval=0.05,
                   what="a lane to the new master")
        with cluster.raw_for(name) as r:
            assert r.command("EXISTS", name) == 0
    finally:
        loop.close()
        client.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_acquire_whose_reply_is_lost_on_a_lane_leaves_no_hold_behind(fresh_cluster: Cluster, flavour: str) -> None:
    """The master stops with an acquire on its way over a lane (for less than the cluster's node
    timeout: no failover): the caller stops waiting after the response timeout, the request still
    runs when the master resumes, and whatever the acquire returns, the lock ends up held once (by
    a caller that knows it) or not at all. Whatever the engine then sends the routed way to that
    master waits for the late reply first."""
    cluster = fresh_cluster
    name = f"py:cluster:lost:{flavour}"
    client = connect(cluster, response_timeout=0.3)
    lock = client.lock(name)
    master = cluster.node(cluster.master_of(name))
    loop = asyncio.new_event_loop()

    async def pairs_async(n: int) -> None:
        for _ in range(n):
            assert await lock.acquire_async(timeout=5)
            await lock.release_async()

    async def attempt_async() -> tuple[bool, int]:
        got = await lock.acquire_async(timeout=10)
        count = await lock.hold_count_async() if got else 0
        if got:
            await lock.release_async()
        return got, count

    def attempt() -> tuple[bool, int]:
        got = bool(lock.acquire(timeout=10))
        count = lock.hold_count() if got else 0
        if got:
            lock.release()
        return got, count

    try:
        for _ in range(3):
            # Calls in quick succession: their lane is open.
            if flavour == "sync":
                for _ in range(40):
                    assert lock.acquire(timeout=5)
                    lock.release()
            else:
                loop.run_until_complete(pairs_async(40))
            os.kill(master.process.pid, signal.SIGSTOP)
            timer = threading.Timer(0.6, os.kill, (master.process.pid, signal.SIGCONT))
            timer.start()
            try:
                got, count = attempt() if flavour == "sync" else loop.run_until_complete(attempt_async())
            except crosslock.RedisUnavailableError:
                got, count = False, 0
            finally:
                timer.join()
            assert count == (1 if got else 0)
            with cluster.raw_for(name) as r:
                wait_until(lambda: r.command("EXISTS", name) == 0, timeout=5, what="no hold left")
    finally:
        loop.close()
        client.close()


def test_the_readme_cluster_example_connects(cluster):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Deployments", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S) if "redis+cluster" in b]
    url = "redis+cluster://10.0.1.1:6379,10.0.1.2:6379,10.0.1.3:6379"
    assert url in block
    namespace: dict = {"crosslock": crosslock}
    exec(compile(block.replace(url, cluster.url), "README.md (cluster)", "exec"), namespace)
    client = namespace["cluster"]
    try:
        assert client.address.startswith("cluster via 127.0.0.1:")
        with client.lock("py:readme:cluster"):
            pass
    finally:
        client.close()
