"""G8: a write Redis refuses for lack of memory keeps the books straight."""

from __future__ import annotations

import crosslock
from harness import FACTORY, REENTRANT, RIVAL, Server, no_leaks


def test_g8_a_re_entrant_release_refused_for_lack_of_memory_keeps_the_hold(server: Server) -> None:
    client = crosslock.connect(server.url)
    rival = crosslock.connect(server.url)
    locks = {}
    for kind in REENTRANT:
        lock = FACTORY[kind](client, f"g8:{kind}")
        assert lock.acquire(timeout=5) and lock.acquire(timeout=5)
        assert lock.hold_count() == 2
        locks[kind] = lock
    server.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    server.command("CONFIG", "SET", "maxmemory", 1)  # every write is refused from here on
    try:
        for kind, lock in locks.items():
            try:
                lock.release()
            except crosslock.CrosslockError as e:
                assert "memory" in str(e).lower() or "OOM" in str(e), f"{kind}: {e}"
            else:
                raise AssertionError(f"{kind}: a release Redis could not write was reported done")
            assert lock.hold_count() == 2, f"{kind}: the local count dropped while Redis kept it"
            assert lock.is_held()
            assert not lock.lost
    finally:
        server.command("CONFIG", "SET", "maxmemory", 0)
    for kind, lock in locks.items():
        lock.release()
        assert lock.hold_count() == 1
        assert not FACTORY[RIVAL[kind]](rival, f"g8:{kind}").acquire(blocking=False), kind
        lock.release()
        assert not lock.locked() or kind == "read_lock"
    client.close()
    rival.close()
    no_leaks(server)
