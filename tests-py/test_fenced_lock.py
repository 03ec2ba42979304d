"""crosslock.FencedLock: every acquisition, by any client and re-entries included, gets a token
strictly greater than every token before it; ``with lock as token`` binds it."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest

import crosslock


def token_key(name: str) -> str:
    return f"redisson_lock_token:{{{name}}}"


@pytest.fixture
def clients(url: str) -> Iterator[list[crosslock.Client]]:
    cs = [crosslock.connect(url) for _ in range(2)]
    try:
        yield cs
    finally:
        for c in cs:
            c.close()


def test_tokens_increase_strictly_across_clients_and_re_entries(client, clients, raw):
    name = "ledger"
    a, b, c = client.fenced_lock(name), clients[0].fenced_lock(name), clients[1].fenced_lock(name)
    tokens = []
    tokens.append(a.acquire_token())
    tokens.append(a.acquire_token())  # a re-entry gets a new, greater token
    assert raw.hgetall(name) == {client.holder(): "2"}
    assert b.acquire_token(blocking=False) is None  # busy: no token, and none used up
    assert b.acquire_token(timeout=0.2) is None
    a.release()
    a.release()
    tokens.append(b.acquire_token(timeout=10))
    b.release()
    with c as token:
        assert isinstance(token, int)
        tokens.append(token)
        with c as inner:
            tokens.append(inner)
    with c.acquired(timeout=5) as token:
        tokens.append(token)
    assert a.acquire()  # a plain acquire answers True, and takes a token too
    a.release()
    tokens.append(a.acquire_token(lease=10))
    a.release()
    assert all(isinstance(t, int) for t in tokens)
    assert all(x < y for x, y in zip(tokens, tokens[1:])), tokens
    assert int(raw.command("GET", token_key(name))) == tokens[-1]
    # The counter outlives the lock (as Redisson's): a later holder keeps counting up from it.
    assert raw.command("EXISTS", name) == 0
    assert raw.command("PTTL", token_key(name)) == -1
    with clients[0].fenced_lock(name) as token:
        assert token == tokens[-1] + 1


def test_tokens_of_contending_threads_follow_the_order_of_the_critical_sections(client, clients):
    """The token each holder gets, appended from inside the critical section, reads increasing:
    a newer holder never carries an older token (what lets a resource refuse a stale writer)."""
    name = "fencing-order"
    seen: list[int] = []
    errors: list[BaseException] = []
    locks = [c.fenced_lock(name) for c in (client, *clients)]

    def worker(i: int) -> None:
        try:
            for _ in range(10):
                with locks[i % len(locks)] as token:
                    seen.append(token)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(seen) == 60
    assert all(x < y for x, y in zip(seen, seen[1:])), seen


async def test_async_with_binds_the_token(client, raw):
    name = "fenced-async"
    lock = client.fenced_lock(name)
    async with lock as first:
        assert isinstance(first, int)
        second = await lock.acquire_token_async()
        assert second is not None and second > first
        await lock.release_async()
    async with lock.acquired(timeout=5) as third:
        assert third > second
    assert int(raw.command("GET", token_key(name))) == third
    assert raw.command("EXISTS", name) == 0


def test_a_fenced_lock_excludes_a_lock_of_the_same_name(client, clients, raw):
    name = "shared-name"
    with client.fenced_lock(name) as token:
        assert token == 1
        assert not clients[0].lock(name).acquire(blocking=False)
    plain = clients[0].lock(name)
    assert plain.acquire()
    assert client.fenced_lock(name).acquire_token(blocking=False) is None
    plain.release()
    assert raw.command("GET", token_key(name)) == "1"  # the failed try took no token
