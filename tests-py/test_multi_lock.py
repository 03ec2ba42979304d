"""crosslock.MultiLock and crosslock.RedLock over 3 and 5 redis-servers started by the tests: all
parts or none, a majority for a RedLock (so it survives a stopped server), and a MultiLock that
fails naming the part whose server is down, holding nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pytest

import crosslock
from support import RedisServer


def connect(server: RedisServer) -> crosslock.Client:
    """A client that notices a stopped server quickly (timeouts plenty for a local server)."""
    return crosslock.connect(server.url, connect_timeout=0.5, response_timeout=0.5)


@dataclass
class Deployment:
    """``n`` independent redis-servers, a client of each, and a second client of each (another
    process, as far as the locks can tell)."""

    servers: list[RedisServer]
    clients: list[crosslock.Client] = field(default_factory=list)
    others: list[crosslock.Client] = field(default_factory=list)

    def keys(self, i: int) -> list[str]:
        with self.servers[i].raw() as r:
            return r.command("KEYS", "*")

    def hash(self, i: int, name: str) -> dict[str, str]:
        with self.servers[i].raw() as r:
            return r.hgetall(name)

    def stop(self, i: int) -> None:
        self.servers[i].stop()

    def alive(self, down: int) -> list[int]:
        return [i for i in range(len(self.servers)) if i != down]


@pytest.fixture
def deploy() -> Iterator[Callable[[int], Deployment]]:
    made: list[Deployment] = []

    def make(n: int) -> Deployment:
        d = Deployment([RedisServer() for _ in range(n)])
        made.append(d)
        d.clients = [connect(s) for s in d.servers]
        d.others = [connect(s) for s in d.servers]
        return d

    yield make
    for d in made:
        for c in d.clients + d.others:
            c.close()
        for s in d.servers:
            s.stop()


def parts(d: Deployment, clients: list[crosslock.Client] | None = None) -> list[crosslock.Lock]:
    return [c.lock(f"account:{i}") for i, c in enumerate(clients or d.clients)]


def test_a_multi_lock_holds_every_part_or_none(deploy):
    d = deploy(3)
    multi = crosslock.MultiLock(parts(d))
    assert [p.name for p in multi.locks] == ["account:0", "account:1", "account:2"]
    holder = d.clients[0].holder()
    assert multi.acquire()
    for i, c in enumerate(d.clients):
        assert d.hash(i, f"account:{i}") == {c.holder(): "1"}
    assert holder.rsplit(":", 1)[1] == d.clients[1].holder().rsplit(":", 1)[1]  # one owner, every part
    assert not crosslock.MultiLock(parts(d, d.others)).acquire(blocking=False)
    multi.release()
    assert [d.keys(i) for i in range(3)] == [[], [], []]

    # The middle part is held elsewhere: a wait limit ends with nothing held anywhere.
    middle = d.others[1].lock("account:1")
    assert middle.acquire(lease=60)
    assert not multi.acquire(timeout=0.3)
    assert d.keys(0) == [] and d.keys(2) == []
    assert d.hash(1, "account:1") == {d.others[1].holder(): "1"}
    assert not multi.acquire(blocking=False)
    assert d.keys(0) == [] and d.keys(2) == []

    # A blocking acquire gets all three once the middle part is released.
    result: dict[str, Any] = {}

    def take() -> None:
        result["acquired"] = bool(multi.acquire(timeout=30))
        result["keys"] = [d.keys(i) for i in range(3)]
        multi.release()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    middle.release()
    t.join(30)
    assert result == {"acquired": True, "keys": [["account:0"], ["account:1"], ["account:2"]]}
    assert [d.keys(i) for i in range(3)] == [[], [], []]


def test_a_multi_lock_of_mixed_kinds(deploy):
    d = deploy(3)
    multi = crosslock.MultiLock(
        [
            d.clients[0].lock("a"),
            d.clients[1].fenced_lock("b"),
            d.clients[2].read_write_lock("c").write_lock(),
        ]
    )
    with multi:
        assert d.hash(0, "a") == {d.clients[0].holder(): "1"}
        assert d.hash(1, "b") == {d.clients[1].holder(): "1"}
        assert d.hash(2, "c") == {"mode": "write", f"{d.clients[2].holder()}:write": "1"}
        assert not d.others[2].read_write_lock("c").read_lock().acquire(blocking=False)
    assert d.keys(0) == [] and d.keys(2) == []
    assert d.keys(1) == ["redisson_lock_token:{b}"]  # the fencing counter outlives the lock


@pytest.mark.parametrize("n", [3, 5])
def test_a_red_lock_acquires_with_a_majority_when_one_server_is_stopped(deploy, n):
    d = deploy(n)
    d.stop(1)
    red = crosslock.RedLock(parts(d))
    assert red.acquire(timeout=5, lease=30)
    alive = d.alive(1)
    for i in alive:
        assert d.hash(i, f"account:{i}") == {d.clients[i].holder(): "1"}
    assert red.validity is not None and 0 < red.validity <= 30
    # Another holder cannot get a majority meanwhile.
    assert not crosslock.RedLock(parts(d, d.others)).acquire(timeout=0.5)
    for i in alive:
        assert d.hash(i, f"account:{i}") == {d.clients[i].holder(): "1"}
    red.release()  # the part on the stopped server was never taken: it is not asked
    assert all(d.keys(i) == [] for i in alive)


def test_a_red_lock_with_a_lost_minority_is_not_lost_and_its_release_succeeds(deploy):
    """A red lock stands while it holds a majority: a lost minority leaves ``lost`` false and the
    release succeeds, releasing what remains; losing a majority makes the release raise."""
    d = deploy(3)
    red = crosslock.RedLock(parts(d))
    assert red.acquire(timeout=5)
    with d.servers[0].raw() as r:
        r.command("DEL", "account:0")  # lost, as far as the holder will find out
    assert red.lost is False
    red.release()
    assert all(d.keys(i) == [] for i in range(3))
    assert red.acquire(timeout=5)
    for i in (0, 2):
        with d.servers[i].raw() as r:
            r.command("DEL", f"account:{i}")
    with pytest.raises(crosslock.LockLostError):
        red.release()
    assert all(d.keys(i) == [] for i in range(3))


def test_a_red_lock_without_a_majority_fails_and_holds_nothing(deploy):
    d = deploy(5)
    taken = [d.others[i].lock(f"account:{i}") for i in (0, 2, 4)]
    for lock in taken:
        assert lock.acquire(lease=60)
    red = crosslock.RedLock(parts(d))
    assert not red.acquire(timeout=0.5)
    assert d.keys(1) == [] and d.keys(3) == []  # what it took was given back
    taken[0].release()  # now 3 of 5 are free: a majority
    assert red.acquire(timeout=5)
    assert {i: d.hash(i, f"account:{i}") for i in (0, 1, 3)} == {
        i: {d.clients[i].holder(): "1"} for i in (0, 1, 3)
    }
    red.release()
    assert [d.keys(i) for i in (0, 1, 3)] == [[], [], []]
    for lock in taken[1:]:
        lock.release()


@pytest.mark.parametrize("n", [3, 5])
def test_a_multi_lock_with_a_server_stopped_fails_naming_it_and_holds_nothing(deploy, n):
    d = deploy(n)
    d.stop(1)
    multi = crosslock.MultiLock(parts(d))
    with pytest.raises(crosslock.RedisUnavailableError) as info:
        multi.acquire(timeout=2)
    err = info.value
    assert err.lock_name == "account:1"
    assert "'account:1'" in str(err) and "nothing is held" in str(err)
    assert all(d.keys(i) == [] for i in d.alive(1))


def test_a_multi_lock_without_a_timeout_fails_naming_a_stopped_server(deploy):
    d = deploy(2)
    d.stop(1)
    multi = crosslock.MultiLock(parts(d))
    with pytest.raises(crosslock.RedisUnavailableError) as info:
        multi.acquire()  # no wait limit: it must still end, not retry forever
    assert info.value.lock_name == "account:1"
    assert d.keys(0) == []


def test_a_multi_lock_of_a_closed_client_fails_at_once(deploy):
    d = deploy(1)
    multi = crosslock.MultiLock(parts(d))
    d.clients[0].close()
    with pytest.raises(crosslock.CrosslockError, match="closed"):
        multi.acquire()


async def test_a_cancelled_async_acquire_gives_back_the_parts_it_took(deploy):
    d = deploy(2)
    busy = d.others[1].lock("account:1")
    assert await busy.acquire_async(lease=60)
    multi = crosslock.MultiLock(parts(d))
    task = asyncio.ensure_future(multi.acquire_async())
    deadline = time.monotonic() + 10
    while d.keys(0) != ["account:0"]:
        assert time.monotonic() < deadline, "the first part was never taken"
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while d.keys(0) != []:
        assert time.monotonic() < deadline, "the cancelled acquire kept the part it took"
        await asyncio.sleep(0.01)
    assert d.hash(1, "account:1") == {d.others[1].holder(): "1"}
    busy.release()


@pytest.mark.parametrize("how", ["sync", "asyncio"])
def test_a_multi_lock_of_many_parts_takes_and_releases_them_all(deploy, how):
    # Parts are tried together and released together: a sync release of 50,000 parts used to go
    # one blocking round trip after another, and some parts timed out and stayed held.
    d = deploy(1)
    n = 20_000
    multi = crosslock.MultiLock([d.clients[0].lock(f"bulk:{i}") for i in range(n)])
    busy = d.others[0].lock(f"bulk:{n - 1}")

    def count() -> int:
        with d.servers[0].raw() as r:
            return r.command("EVAL", "return #redis.call('keys', 'bulk:*')", 0)

    async def take_and_release() -> None:
        assert await multi.acquire_async(timeout=60)
        assert count() == n
        await multi.release_async()

    if how == "sync":
        assert multi.acquire(timeout=60)
        assert count() == n
        multi.release()
    else:
        asyncio.run(take_and_release())
    assert count() == 0
    # The last part busy: nothing is kept, the other holder's part untouched.
    assert busy.acquire(lease=60)
    if how == "sync":
        assert not multi.acquire(blocking=False)
    else:
        assert asyncio.run(multi.acquire_async(blocking=False)) is False
    assert count() == 1
    assert d.hash(0, f"bulk:{n - 1}") == {d.others[0].holder(): "1"}
    busy.release()


def test_extend_sets_every_part_and_a_lost_part_makes_it_lost(deploy):
    d = deploy(3)
    multi = crosslock.MultiLock(parts(d))
    assert multi.acquire(lease=0.3)
    multi.extend(5)
    for i in range(3):
        with d.servers[i].raw() as r:
            assert r.command("PTTL", f"account:{i}") > 3000
    time.sleep(0.45)  # past the first lease
    assert not multi.lost
    assert not d.others[1].lock("account:1").acquire(blocking=False)
    assert d.others[2].lock("account:2").force_unlock()
    with pytest.raises(crosslock.LockLostError) as info:
        multi.extend(5)
    assert info.value.lock_name == "account:2"
    assert multi.lost
    with pytest.raises(crosslock.LockLostError):
        multi.release()
    with pytest.raises(crosslock.NotHeldError):
        multi.extend(5)


async def test_a_red_lock_extends_async_and_decorates(deploy):
    d = deploy(3)
    red = crosslock.RedLock(parts(d))
    assert await red.acquire_async(lease=0.3)
    await red.extend_async(5)
    validity = red.validity
    assert validity is not None and 4 < validity <= 5
    await red.release_async()

    calls = []

    @red
    async def work() -> None:
        calls.append(not red.lost)

    await work()
    assert calls == [True]
    assert d.keys(0) == []
