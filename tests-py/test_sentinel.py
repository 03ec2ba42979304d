"""Behind Redis Sentinel, from Python: a ``redis+sentinel://`` client finds the master, every object
works there, and a failover (``SENTINEL FAILOVER``, kill -9 of the master) is followed: waiters keep
waiting and acquire on the new master, a hold that reached the replica is kept, a hold that did not
is reported lost, and no call hangs past its limit."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

import crosslock
from support import (RedisServer, SentinelGroup, a_failover_keeps_replicated_holds_and_reports_the_others_lost,
                     eight_workers_exclude_each_other, killing_the_master_is_survived_by_waiters, release_wakes_every_kind)


@pytest.fixture(scope="module")
def group() -> Iterator[SentinelGroup]:
    """One group for the tests that do not fail it over."""
    g = SentinelGroup()
    try:
        yield g
    finally:
        g.stop()


@pytest.fixture
def fresh_group() -> Iterator[SentinelGroup]:
    """A group of its own, for a test that fails it over."""
    g = SentinelGroup()
    try:
        yield g
    finally:
        g.stop()


def connect(group: SentinelGroup, **options: float) -> crosslock.Client:
    options.setdefault("connect_timeout", 8.0)
    return crosslock.connect(group.url, **options)


def test_the_lock_lives_on_the_master(group):
    with connect(group) as client:
        assert "master 'crosslock' via sentinels" in client.address
        with client.lock("py:sentinel:where"):
            with group.master().raw() as r:
                assert len(r.hgetall("py:sentinel:where")) == 1


def test_eight_workers_exclude_each_other_exactly(group):
    clients = [connect(group), connect(group)]
    try:
        eight_workers_exclude_each_other(clients, "py:sentinel:counter")
    finally:
        for c in clients:
            c.close()


def test_a_release_wakes_the_waiter_of_every_kind(group):
    a, b = connect(group), connect(group)
    try:
        release_wakes_every_kind(a, b, "py:sentinel:wake")
    finally:
        a.close()
        b.close()


def test_the_watchdog_renews_and_a_deleted_lock_is_reported_lost(group):
    fired = threading.Event()
    with connect(group, watchdog_timeout=0.6) as client:
        lock = client.lock("py:sentinel:watchdog", on_lost=lambda _lock: fired.set())
        lock.acquire()
        time.sleep(1.5)
        assert lock.is_held() and not lock.lost
        with group.master().raw() as r:
            r.command("DEL", "py:sentinel:watchdog")
        assert fired.wait(5), "the renewal reports the lock lost"
        assert lock.lost


def test_a_wrong_master_name_or_no_sentinel_is_a_clear_error(group):
    port = group.sentinel_ports[0]
    with pytest.raises(crosslock.InvalidArgumentError, match="no-such-master"):
        crosslock.connect(f"redis+sentinel://127.0.0.1:{port}/no-such-master")
    dead = RedisServer()
    dead.stop()
    started = time.monotonic()
    with pytest.raises(crosslock.RedisUnavailableError, match=f"127.0.0.1:{dead.port}"):
        crosslock.connect(f"redis+sentinel://127.0.0.1:{dead.port}/crosslock", connect_timeout=0.5)
    assert time.monotonic() - started < 5
    with pytest.raises(crosslock.InvalidArgumentError, match="master"):
        crosslock.connect(f"redis+sentinel://127.0.0.1:{port}")


def test_wait_for_replicas_returns_once_the_replica_has_it_or_gives_it_back(group):
    with connect(group, wait_for_replicas=1, replica_wait_timeout=0.5) as client:
        with client.lock("py:sentinel:synced"):
            # No waiting here: the acquire returned after the replica acknowledged it.
            with group.replica().raw() as r:
                assert list(r.hgetall("py:sentinel:synced").values()) == ["1"]
        sem = client.semaphore("py:sentinel:synced-sem")
        assert sem.try_set_permits(2)
        sem.acquire(2)
        with group.replica().raw() as r:
            assert r.command("GET", "py:sentinel:synced-sem") == "0"
        sem.release(2)
    # Two replicas asked for, one there: given back, a clear error, nothing held.
    with connect(group, wait_for_replicas=2, replica_wait_timeout=0.2) as client:
        lock = client.lock("py:sentinel:short")
        with pytest.raises(crosslock.RedisUnavailableError, match=r"1 of the 2 replica\(s\).*given back"):
            lock.acquire(timeout=5)
        assert not lock.locked()
        with group.master().raw() as r:
            assert r.command("EXISTS", "py:sentinel:short") == 0


def test_wait_for_replicas_is_checked(group):
    with pytest.raises(crosslock.InvalidArgumentError, match="wait_for_replicas"):
        crosslock.connect(group.url, wait_for_replicas=0)
    with pytest.raises(crosslock.InvalidArgumentTypeError, match="wait_for_replicas"):
        crosslock.connect(group.url, wait_for_replicas="1")  # type: ignore[arg-type]


def test_sentinel_failover_keeps_replicated_holds_and_reports_the_others_lost(fresh_group):
    a_failover_keeps_replicated_holds_and_reports_the_others_lost(fresh_group)


def test_killing_the_master_is_survived_by_waiters(fresh_group):
    killing_the_master_is_survived_by_waiters(fresh_group)


def test_the_readme_deployments_example_runs(group, capsys):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Deployments", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    url = "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster/0"
    assert url in block
    namespace: dict = {}
    exec(compile(block.replace(url, group.url), "README.md (deployments)", "exec"), namespace)
    assert namespace["client"].closed
    assert capsys.readouterr().out.startswith("held on master 'crosslock' via sentinels 127.0.0.1:")
    # The wait_for_replicas line, with this group as its `url`.
    (replicas,) = [b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S) if "wait_for_replicas" in b]
    namespace = {"crosslock": crosslock, "url": group.url}
    exec(compile(replicas, "README.md (wait_for_replicas)", "exec"), namespace)
    with namespace["client"] as client:
        with client.lock("py:sentinel:readme-synced"):
            pass
