"""A holder is never left believing it holds a lock it lost, and never loses one while it lives.

G1: a live holder keeps every kind of lock while its connections are closed under it.
G2: the lost signal fires during a partition, before anyone else can acquire.
G3: a hold taken with an explicit lease is told when the lease runs out.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

import crosslock
from harness import FACTORY, KIND_IDS, RIVAL, Proxy, Server, Timed, make, no_leaks, wait_until

FAULTS = ["idle_timeout", "kill_storm"]


@pytest.mark.parametrize("fault", FAULTS)
def test_g1_a_live_holder_keeps_every_kind_of_lock_when_its_connections_are_closed(server: Server, fault: str) -> None:
    lost: list[str] = []
    # A 3 s watchdog renews every second: longer than the 1 s idle timeout below, so without a
    # keepalive every renewal would be the first command on a connection the server closed.
    holder = crosslock.connect(server.url, watchdog_timeout=3.0)
    rival = crosslock.connect(server.url)
    locks = {}
    for kind in KIND_IDS:
        lock = FACTORY[kind](holder, f"g1:{kind}")
        assert lock.acquire(timeout=5)
        locks[kind] = lock
    permits = holder.permit_expirable_semaphore("g1:permits", on_lost=lambda s, p: lost.append(p))
    assert permits.try_set_permits(1)
    permit = permits.acquire(timeout=5)  # no lease: kept by the watchdog
    assert permit is not None
    connections_before = int(server.command("INFO", "stats").split("total_connections_received:")[1].split()[0])

    stop = threading.Event()
    if fault == "idle_timeout":
        server.command("CONFIG", "SET", "timeout", "1")
    else:
        def storm() -> None:
            with server.raw() as r:
                while not stop.wait(random.uniform(0.2, 0.5)):
                    r.command("CLIENT", "KILL", "TYPE", "normal")
                    r.command("CLIENT", "KILL", "TYPE", "pubsub")
        threading.Thread(target=storm, daemon=True).start()
    time.sleep(7.0)  # more than two leases: a missed renewal would have let one expire
    stop.set()
    server.command("CONFIG", "SET", "timeout", "0")

    if fault == "kill_storm":
        reconnects = int(server.command("INFO", "stats").split("total_connections_received:")[1].split()[0])
        assert reconnects > connections_before + 5, "the storm never closed the holder's connections"
    for kind, lock in locks.items():
        assert not lock.lost, f"{kind} was reported lost"
        other = FACTORY[RIVAL[kind]](rival, f"g1:{kind}")
        assert not other.acquire(blocking=False), f"another client took the {kind} from a live holder"
    assert not lost and not permits.lost(permit)
    assert not rival.permit_expirable_semaphore("g1:permits").acquire(blocking=False)
    for lock in locks.values():
        lock.release()
    permits.release(permit)
    holder.close()
    rival.close()
    no_leaks(server, allowed=["g1:permits"])


def test_g2_the_lost_signal_fires_in_a_partition_before_anyone_else_can_acquire(server: Server) -> None:
    proxy = Proxy(server.port)
    lost_at: dict[str, float] = {}

    def on_lost(lock: object) -> None:
        lost_at.setdefault(lock.name, time.monotonic())  # type: ignore[attr-defined]

    holder = crosslock.connect(proxy.url, watchdog_timeout=3.0, response_timeout=1.0)
    rival = crosslock.connect(server.url)
    held = {}
    for kind in KIND_IDS:
        name = f"g2:{kind}"
        lock = make(holder, kind, name, on_lost)
        assert lock.acquire(timeout=5)
        held[kind] = lock
    permits = holder.permit_expirable_semaphore(
        "g2:permits", on_lost=lambda s, p: lost_at.setdefault("g2:permits", time.monotonic())
    )
    assert permits.try_set_permits(1)
    permit = permits.acquire(timeout=5)
    assert permit is not None

    proxy.partition()  # every byte between the holder and Redis is held from now on
    rivals = {kind: Timed(lambda k=kind: FACTORY[RIVAL[k]](rival, f"g2:{k}").acquire(timeout=15)) for kind in KIND_IDS}
    rival_permits = rival.permit_expirable_semaphore("g2:permits")
    rivals["permits"] = Timed(lambda: rival_permits.acquire(timeout=15))
    for kind, t in rivals.items():
        t.join(20)
        assert t.error is None and t.result, f"the rival never got the {kind}: {t.error!r}"
    for kind, t in rivals.items():
        name = "g2:permits" if kind == "permits" else f"g2:{kind}"
        assert name in lost_at, f"the partitioned holder of {name} was never told"
        assert lost_at[name] <= t.finished_at, (
            f"{name}: the holder was told {lost_at[name] - t.finished_at:.3f}s after another client acquired"
        )
    for kind, lock in held.items():
        assert lock.lost, kind
    assert permits.lost(permit)

    proxy.heal()
    for kind, lock in held.items():
        with pytest.raises(crosslock.LockLostError):
            lock.release()
    holder.close()
    rival.close()
    proxy.close()


def test_g3_a_hold_with_an_explicit_lease_is_told_when_the_lease_runs_out(server: Server) -> None:
    told = threading.Semaphore(0)
    client = crosslock.connect(server.url)
    held = {}
    for kind in KIND_IDS:
        name = f"g3:{kind}"
        lock = make(client, kind, name, lambda _l: told.release())
        assert lock.acquire(timeout=5, lease=0.4)
        held[kind] = lock
    for _ in held:
        assert told.acquire(timeout=10), "a hold whose lease ran out was never told"
    for kind, lock in held.items():
        assert lock.lost, kind
        with pytest.raises(crosslock.LockLostError):
            lock.release()
    client.close()
    no_leaks(server)
