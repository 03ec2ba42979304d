"""G9: no double holding while Redis keeps its state, with a detector that does not trust the
library; when Redis loses its state, the old holder is told by its next renewal.

Holders are real processes (worker.py). The detector is a plain key, ``inside:<name>``, set with
``SET NX`` on entering the critical section: a second process inside is caught by Redis itself.
"""

from __future__ import annotations

import random
import signal
import threading
import time

import pytest

import crosslock
from harness import FACTORY, FAIR, KIND_IDS, RIVAL, Server, Worker, make, no_leaks, wait_until

SOAK_KINDS = [k for k in KIND_IDS if k != "read_lock"]  # readers share by design
SOAK_SECONDS = 6.0
WORKERS = 4

LEAVE_FOR = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def call(server: Server, *args: object) -> object:
    """A plain command that waits out a restart."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return server.command(*args)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("kind", SOAK_KINDS)
def test_g9_no_double_holding_through_kills_connection_storms_and_a_restart_with_aof(kind: str) -> None:
    server = Server(aof=True)
    name = f"g9:{kind}"
    ids = iter(range(1000))
    end = time.monotonic() + SOAK_SECONDS

    def spawn() -> tuple[str, Worker]:
        me = f"w{next(ids)}"
        w = Worker("soak", server.url, kind, name, me, f"{max(0.5, end - time.monotonic()):.2f}")
        return me, w

    live = dict(spawn() for _ in range(WORKERS))
    dead: list[Worker] = []
    kills = 0
    restarted = False
    try:
        while time.monotonic() < end - 0.5:
            time.sleep(random.uniform(0.3, 0.6))
            # kill -9 a random holder; if it died inside the critical section, clear its mark
            # (it does nothing any more) so the next holder's entry is not taken for a double
            me = random.choice(list(live))
            w = live.pop(me)
            w.kill()
            kills += 1
            dead.append(w)
            call(server, "EVAL", LEAVE_FOR, 1, f"inside:{name}", me)
            new_me, new_w = spawn()
            live[new_me] = new_w
            call(server, "CLIENT", "KILL", "TYPE", "normal")
            call(server, "CLIENT", "KILL", "TYPE", "pubsub")
            if not restarted and time.monotonic() > end - SOAK_SECONDS / 2:
                server.restart()  # kill -9 of redis-server; the AOF (fsync always) keeps everything
                restarted = True
        assert restarted
        incs = 0
        for w in live.values():
            code = w.finish(timeout=30)
            assert not any(l.startswith("DOUBLE") for l in w.lines), [l for l in w.lines if not l == "INC"]
            assert code == 0, f"a holder failed ({code}): {w.lines[-5:]} {w.stderr()}"
            incs += int(w.expect("DONE", timeout=1))
        dead_incs = 0
        for w in dead:
            assert not any(l.startswith("DOUBLE") for l in w.lines), [l for l in w.lines if not l == "INC"]
            dead_incs += sum(1 for l in w.lines if l == "INC")
        counter = int(call(server, "GET", f"counter:{name}") or 0)
        assert incs + dead_incs > 0, "nobody ever got the lock"
        # each killed holder may have written its increment and died before saying so
        assert incs + dead_incs <= counter <= incs + dead_incs + kills, (incs, dead_incs, counter, kills)
        if kind in FAIR:
            # Waiters killed while queued stay in the queue until the next acquire finds their
            # deadline passed (as with Redisson: nobody else is left to clean up after them).
            client = crosslock.connect(server.url, fair_lock_wait_timeout=1)
            lock = FACTORY[kind](client, name)

            def purged() -> bool:
                if lock.acquire(timeout=2):
                    lock.release()
                return not [k for k in server.keys() if k.startswith("redisson_lock_")]
            try:
                wait_until(purged, timeout=60, interval=0.1)
            except AssertionError:
                queue = call(server, "LRANGE", f"redisson_lock_queue:{{{name}}}", 0, -1)
                deadlines = call(server, "ZRANGE", f"redisson_lock_timeout:{{{name}}}", 0, -1, "WITHSCORES")
                now = call(server, "TIME")
                raise AssertionError(f"dead waiters never purged: queue {queue}, deadlines {deadlines}, "
                                     f"server time {now}, hash {call(server, 'HGETALL', name)}") from None
            client.close()
        no_leaks(server, allowed=[f"counter:{name}"])
    finally:
        for w in list(live.values()) + dead:
            w.kill()
        server.stop()


def test_g9_a_holder_frozen_past_its_lease_is_told_on_waking_and_its_release_is_refused(server: Server) -> None:
    holders = {kind: Worker("hold", server.url, kind, f"g9s:{kind}") for kind in KIND_IDS}
    for w in holders.values():
        w.expect("HELD")
    for w in holders.values():
        w.signal(signal.SIGSTOP)
    rival = crosslock.connect(server.url)
    try:
        taken = {kind: FACTORY[RIVAL[kind]](rival, f"g9s:{kind}") for kind in KIND_IDS}
        for kind, lock in taken.items():
            assert lock.acquire(timeout=10), f"the frozen holder's {kind} never expired"
        for w in holders.values():
            w.signal(signal.SIGCONT)
        for kind, w in holders.items():
            w.expect("ONLOST", timeout=10)
            w.send("check")
            assert w.expect("", timeout=10) == "LOST", kind
            w.send("release")
            assert w.expect("REFUSED", timeout=10) == "LockLostError", kind
            assert w.finish() == 0
        for kind, lock in taken.items():
            assert lock.is_held(), f"the woken holder's release took the {kind} from its new holder"
            lock.release()
    finally:
        for w in holders.values():
            w.signal(signal.SIGCONT)
            w.kill()
        rival.close()
    no_leaks(server, allowed=["redisson_lock_token:{g9s:fenced_lock}"])


@pytest.mark.parametrize("persistence", ["aof", "none"])
def test_g9_a_restart_keeps_every_hold_with_aof_and_tells_every_holder_without(persistence: str) -> None:
    server = Server(aof=persistence == "aof")
    told: list[str] = []
    lock_told = threading.Lock()

    def on_lost(lock: object) -> None:
        with lock_told:
            told.append(lock.name)  # type: ignore[attr-defined]

    holder = crosslock.connect(server.url, watchdog_timeout=1.5)
    rival = crosslock.connect(server.url)
    try:
        held = {}
        for kind in KIND_IDS:
            name = f"g9r:{kind}"
            lock = make(holder, kind, name, on_lost)
            assert lock.acquire(timeout=5)
            held[kind] = lock
        server.restart()
        if persistence == "aof":
            time.sleep(3.5)  # more than two leases
            assert not told, f"kept locks were reported lost: {told}"
            for kind, lock in held.items():
                assert not lock.lost
                assert not FACTORY[RIVAL[kind]](rival, f"g9r:{kind}").acquire(blocking=False), kind
                lock.release()
        else:
            deadline = time.monotonic() + 10
            while len(told) < len(held) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sorted(told) == sorted(f"g9r:{k}" for k in held), told
            for kind, lock in held.items():
                assert lock.lost
                with pytest.raises(crosslock.LockLostError):
                    lock.release()
        holder.close()
        rival.close()
        no_leaks(server, allowed=["redisson_lock_token:{g9r:fenced_lock}"])
    finally:
        server.stop()
