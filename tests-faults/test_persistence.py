"""G10: what survives a restart of Redis is what Redis persisted (the README's persistence table).

With AOF (fsync always here) a kill -9 and restart keeps every object's state: fencing tokens go on
increasing, a latch stays closed, a semaphore keeps its count. Without persistence the restart
starts from nothing, for crosslock and Redisson alike: tokens start again from 1, every latch is
open, every semaphore has no permits.
"""

from __future__ import annotations

import pytest

import crosslock
from harness import Server


@pytest.mark.parametrize("persistence", ["aof", "none"])
def test_g10_tokens_latches_and_permits_through_a_restart_are_what_redis_persisted(persistence: str) -> None:
    server = Server(aof=persistence == "aof")
    try:
        with crosslock.connect(server.url) as client:
            fenced = client.fenced_lock("g10:fenced")
            tokens = []
            for _ in range(3):
                token = fenced.acquire_token(timeout=5)
                assert token is not None
                tokens.append(token)
                fenced.release()
            assert tokens == sorted(tokens) and len(set(tokens)) == 3, tokens
            latch = client.count_down_latch("g10:latch")
            assert latch.try_set_count(2)
            latch.count_down()
            semaphore = client.semaphore("g10:semaphore")
            assert semaphore.try_set_permits(3)
            assert semaphore.acquire(1, timeout=5)
        server.restart()  # kill -9, then the same port and directory
        with crosslock.connect(server.url) as client:
            token = client.fenced_lock("g10:fenced").acquire_token(timeout=5)
            latch = client.count_down_latch("g10:latch")
            semaphore = client.semaphore("g10:semaphore")
            if persistence == "aof":
                assert token is not None and token > tokens[-1], (token, tokens)
                assert latch.count() == 1
                assert not latch.wait(timeout=0.05)
                assert semaphore.available_permits() == 2
            else:
                # What the README says a restart without persistence does.
                assert token == 1, (token, tokens)
                assert latch.count() == 0
                assert latch.wait(timeout=0.05), "a latch Redis forgot is open"
                assert semaphore.available_permits() == 0
            client.fenced_lock("g10:fenced").release()
    finally:
        server.stop()
