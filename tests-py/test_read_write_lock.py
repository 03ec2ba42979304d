"""crosslock.ReadWriteLock: readers hold at once, a writer excludes readers (and is woken by their
release), a write release wakes every waiting reader, the writer may also read, and a reader
asking for the write lock is refused at once (never a hang).

Overlap is proven with a barrier that only opens when every reader is inside at the same time.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterator

import pytest

import crosslock
from support import wait_until


def rw_channel(name: str) -> str:
    return f"redisson_rwlock:{{{name}}}"


def timeout_key(name: str, holder: str, k: int) -> str:
    return f"{{{name}}}:{holder}:rwlock_timeout:{k}"


@pytest.fixture
def clients(url: str) -> Iterator[list[crosslock.Client]]:
    """Three more clients: three processes, as far as the lock can tell."""
    cs = [crosslock.connect(url) for _ in range(3)]
    try:
        yield cs
    finally:
        for c in cs:
            c.close()


def test_readers_hold_at_once(client, clients, raw):
    name = "catalog"
    readers = [client.read_write_lock(name).read_lock()] * 3 + [c.read_write_lock(name).read_lock() for c in clients]
    inside = threading.Barrier(len(readers), timeout=20)  # opens only if all are inside together
    holders: list[str] = []
    layout: dict[str, str] = {}
    errors: list[BaseException] = []

    def reader(lock: crosslock.ReadLock) -> None:
        try:
            with lock:
                holders.append(lock.client.holder())
                if inside.wait() == 0:
                    layout.update(raw.hgetall(name))
                inside.wait()  # nobody leaves before the layout was read
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(lock,)) for lock in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert layout == {"mode": "read", **{h: "1" for h in holders}}
    assert len(set(holders)) == len(readers)
    assert raw.command("KEYS", "*") == []


def test_a_writer_waits_for_the_readers_and_is_woken_by_the_last_release(client, clients, raw):
    name = "prices"
    first, second = (c.read_write_lock(name).read_lock() for c in clients[:2])
    assert first.acquire(lease=60) and second.acquire(lease=60)  # only releases let the writer in
    writer = client.read_write_lock(name).write_lock()
    assert not writer.acquire(blocking=False)
    assert not writer.acquire(timeout=0.3)
    result: dict[str, Any] = {}

    def write() -> None:
        result["holder"] = client.holder()
        result["acquired"] = bool(writer.acquire(timeout=30))
        result["layout"] = raw.hgetall(name)
        writer.release()

    t = threading.Thread(target=write, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(rw_channel(name)) == 1, what="the writer to wait")
    first.release()
    # One reader is still inside: the writer must still be waiting.
    assert raw.hgetall(name) == {"mode": "read", clients[1].holder(): "1"}
    assert "acquired" not in result
    second.release()
    t.join(10)
    assert result["acquired"] is True
    assert result["layout"] == {"mode": "write", f"{result['holder']}:write": "1"}
    assert raw.command("KEYS", "*") == []


def test_readers_wait_for_the_writer_and_a_write_release_wakes_them_all(client, clients, raw, redis_server):
    name = "inventory"
    writer = client.read_write_lock(name).write_lock()
    assert writer.acquire(lease=60)
    for c in clients:
        assert not c.read_write_lock(name).read_lock().acquire(timeout=0.2)
    inside = threading.Barrier(len(clients), timeout=20)
    result: list[bool] = []

    def read(c: crosslock.Client) -> None:
        lock = c.read_write_lock(name).read_lock()
        result.append(bool(lock.acquire(timeout=30)))
        inside.wait()  # all three at once after one write release
        lock.release()

    threads = [threading.Thread(target=read, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    wait_until(lambda: raw.numsub(rw_channel(name)) == len(clients), what="every reader to wait")
    with redis_server.raw() as sub:
        sub.subscribe(rw_channel(name))
        writer.release()
        assert sub.next_message(timeout=10) == ["message", rw_channel(name), "1"]  # wake everyone
    for t in threads:
        t.join(30)
    assert result == [True] * len(clients)
    assert raw.command("KEYS", "*") == []


def test_the_writer_may_also_read_and_release_the_write_lock_first(client, clients, raw):
    name = "ledger"
    rw = client.read_write_lock(name)
    holder = client.holder()
    assert rw.read_lock() is rw.read_lock() and rw.write_lock() is rw.write_lock()
    assert rw.write_lock().acquire()
    assert rw.read_lock().acquire(blocking=False)  # a downgrade, without waiting
    assert raw.hgetall(name) == {"mode": "write", f"{holder}:write": "1", holder: "1"}
    assert raw.command("EXISTS", timeout_key(name, holder, 1)) == 1
    other_reader = clients[0].read_write_lock(name).read_lock()
    assert not other_reader.acquire(blocking=False)  # still a writer inside
    rw.write_lock().release()
    # Left in read mode: other readers may join, writers may not.
    assert raw.hgetall(name) == {"mode": "read", holder: "1"}
    assert other_reader.acquire(blocking=False)
    assert not clients[1].read_write_lock(name).write_lock().acquire(blocking=False)
    other_reader.release()
    rw.read_lock().release()
    assert raw.command("KEYS", "*") == []


def test_a_reader_asking_for_the_write_lock_is_refused_at_once(client, raw):
    name = "upgrade"
    rw = client.read_write_lock(name)
    holder = client.holder()
    assert rw.read_lock().acquire()
    before = raw.hgetall(name)
    # However long it may wait, the answer is immediate (a hang would fail on pytest's timeout).
    for how in ({}, {"timeout": 30}, {"blocking": False}):
        with pytest.raises(crosslock.UpgradeRefusedError) as info:
            rw.write_lock().acquire(**how)
        err = info.value
        assert isinstance(err, RuntimeError) and err.code == "UPGRADE_REFUSED"
        assert err.lock_name == name and name in str(err)
        assert holder in str(err)
    assert raw.hgetall(name) == before  # Redis unchanged
    assert rw.read_lock().hold_count() == 1
    rw.read_lock().release()
    assert rw.write_lock().acquire(blocking=False)  # fine once the read lock is released
    rw.write_lock().release()
    assert raw.command("KEYS", "*") == []


async def test_an_asyncio_reader_asking_for_the_write_lock_is_refused_at_once(client, raw):
    name = "upgrade-async"
    rw = client.read_write_lock(name)
    async with rw.read_lock():
        me = asyncio.current_task()
        assert me is not None
        timer = asyncio.get_running_loop().call_later(20, me.cancel)  # a hang fails, not blocks
        try:
            with pytest.raises(crosslock.UpgradeRefusedError) as info:
                await rw.write_lock().acquire_async()
        finally:
            timer.cancel()
        assert info.value.lock_name == name
        assert await rw.read_lock().hold_count_async() == 1
    assert raw.command("KEYS", "*") == []


def test_each_read_hold_has_its_own_timeout_key_and_the_last_release_frees_it(client, raw):
    name = "holds"
    read = client.read_write_lock(name).read_lock()
    holder = client.holder()
    assert read.acquire(lease=60)
    assert read.acquire(lease=5)
    assert raw.hgetall(name) == {"mode": "read", holder: "2"}
    assert 59_000 < raw.command("PTTL", timeout_key(name, holder, 1)) <= 60_000
    assert 4_000 < raw.command("PTTL", timeout_key(name, holder, 2)) <= 5_000
    read.release()  # the newest hold's key goes
    assert raw.command("EXISTS", timeout_key(name, holder, 2)) == 0
    assert raw.hgetall(name) == {"mode": "read", holder: "1"}
    read.release()
    assert raw.command("KEYS", "*") == []
