"""G10–G12: Redis out of reach, as users meet it.

- G10: every object's wait rides out a restart of about a second (shorter than the outage
  tolerance, the connect timeout), with and without AOF.
- G11: an outage is never "busy". A wait that ends without Redis answering raises
  ``RedisUnavailableError`` (``acquire()`` does not return ``False``, ``acquired()`` does not
  raise ``LockTimeoutError``), every time; a busy object still times out as before. A single try
  is bounded by the response timeout.
- G12: the release of a hold already known lost raises ``LockLostError`` at once, without waiting
  for Redis.
"""

from __future__ import annotations

import asyncio
import time
import pytest

import crosslock
from harness import FACTORY, KIND_IDS, RIVAL, Server, Timed, wait_until

RESPONSE = 1.0
SLACK = 0.35


def down_client(server: Server) -> crosslock.Client:
    return crosslock.connect(server.url, connect_timeout=2, response_timeout=RESPONSE)


# -- G10: a short restart -------------------------------------------------------------------


@pytest.mark.parametrize("persistence", ["none", "aof"])
def test_g10_every_wait_rides_out_a_one_second_restart(persistence: str) -> None:
    server = Server(aof=persistence == "aof")
    try:
        holder = crosslock.connect(server.url, connect_timeout=6, response_timeout=RESPONSE)
        waiter = crosslock.connect(server.url, connect_timeout=6, response_timeout=RESPONSE)
        # Held with a lease: with AOF the holds outlive the restart and expire after it; without,
        # the restart drops them.
        for kind in KIND_IDS:
            assert FACTORY[RIVAL[kind]](holder, f"g10:{kind}").acquire(timeout=5, lease=3.0)
        for part in ("g10:m1", "g10:m2"):
            assert holder.lock(part).acquire(timeout=5, lease=3.0)
        assert waiter.semaphore("g10:sem").try_set_permits(0)
        assert waiter.permit_expirable_semaphore("g10:pes").try_set_permits(0)
        assert waiter.count_down_latch("g10:latch").try_set_count(1)

        # The spin lock (it polls) starts last, once the others are idle.
        waits: dict[str, Timed] = {
            kind: Timed(lambda k=kind: FACTORY[k](waiter, f"g10:{k}").acquire())
            for kind in KIND_IDS
            if kind != "spin_lock"
        }
        waits["semaphore"] = Timed(lambda: waiter.semaphore("g10:sem").acquire())
        waits["permit_expirable_semaphore"] = Timed(lambda: waiter.permit_expirable_semaphore("g10:pes").acquire())
        waits["latch"] = Timed(lambda: waiter.count_down_latch("g10:latch").wait())
        waits["multi_lock"] = Timed(
            lambda: crosslock.MultiLock([waiter.lock("g10:m1"), waiter.lock("g10:m2")]).acquire()
        )
        # Every waiter is waiting now: subscribed, each to its own channel, and idle, its attempt
        # after subscribing answered (a plain semaphore's attempt cut off in flight has an
        # unknown outcome, and fails by design: README, "What a plain Semaphore cannot know").
        wait_until(lambda: len(server.channels()) >= len(waits), what="every waiter subscribed")
        wait_until(lambda: quiet(server, 0.1), what="every waiter idle")
        if "spin_lock" in KIND_IDS:
            waits["spin_lock"] = Timed(lambda: FACTORY["spin_lock"](waiter, "g10:spin_lock").acquire())
        server.kill()
        time.sleep(1.0)
        server.start()

        helper = crosslock.connect(server.url)
        helper.semaphore("g10:sem").release(1)
        helper.permit_expirable_semaphore("g10:pes").add_permits(1)
        if persistence == "aof":
            helper.count_down_latch("g10:latch").count_down()
        for what, t in waits.items():
            t.join(20)
            assert t.error is None, f"{what}: the wait failed across the restart: {t.error!r}"
            assert t.result, f"{what}: {t.result!r}"
        helper.close()
        holder.close()
        waiter.close()
    finally:
        server.stop()


def quiet(server: Server, seconds: float) -> bool:
    """Whether the server ran no script for ``seconds``."""
    before = server.script_calls()
    time.sleep(seconds)
    return server.script_calls() == before


# -- G11: an outage is not "busy" ------------------------------------------------------------


def assert_unavailable(what: str, t: Timed, bound: float) -> None:
    t.join()
    assert isinstance(t.error, crosslock.RedisUnavailableError), f"{what}: {t.result!r} {t.error!r}"
    assert t.seconds <= bound + SLACK, f"{what}: took {t.seconds:.2f}s"


def test_g11_a_busy_object_times_out_and_names_its_holder(server: Server) -> None:
    holder = down_client(server)
    client = down_client(server)
    for kind in KIND_IDS:
        assert FACTORY[RIVAL[kind]](holder, f"g11b:{kind}").acquire(timeout=5)
    for kind in KIND_IDS:
        lock = FACTORY[kind](client, f"g11b:{kind}")
        assert bool(lock.acquire(timeout=0.2)) is False, kind
        assert bool(lock.acquire(blocking=False)) is False, kind
        with pytest.raises(crosslock.LockTimeoutError, match="held by"):
            with lock.acquired(timeout=0.2):
                pass
    assert not client.semaphore("g11b:sem").acquire(timeout=0.2)
    holder.close()
    client.close()


def test_g11_every_wait_form_raises_unavailable_while_redis_is_down(server: Server) -> None:
    client = down_client(server)
    assert client.lock("g11:warm").acquire(timeout=1)  # connected once, then Redis goes
    client.lock("g11:warm").release()
    server.kill()

    # Twice: the second round meets the clean-ups the first one left (in a fresh process the
    # first call raised and the next returned False).
    for round in range(2):
        waits: dict[str, Timed] = {}
        for kind in KIND_IDS:
            waits[f"{kind} acquire(timeout=1)"] = Timed(lambda k=kind: FACTORY[k](client, f"g11:{k}").acquire(timeout=1))
            waits[f"{kind} acquired(timeout=1)"] = Timed(
                lambda k=kind: FACTORY[k](client, f"g11:{k}").acquired(timeout=1).__enter__()
            )
        waits["semaphore acquire(timeout=1)"] = Timed(lambda: client.semaphore("g11:sem").acquire(timeout=1))
        waits["permit_expirable_semaphore acquire(timeout=1)"] = Timed(
            lambda: client.permit_expirable_semaphore("g11:pes").acquire(timeout=1)
        )
        waits["latch wait(timeout=1)"] = Timed(lambda: client.count_down_latch("g11:latch").wait(timeout=1))
        waits["multi_lock acquire(timeout=1)"] = Timed(
            lambda: crosslock.MultiLock([client.lock("g11:m1"), client.lock("g11:m2")]).acquire(timeout=1)
        )

        async def in_asyncio() -> bool:
            return await client.lock("g11:async").acquire_async(timeout=1)

        waits["lock acquire_async(timeout=1)"] = Timed(lambda: asyncio.run(in_asyncio()))
        for what, t in waits.items():
            assert_unavailable(f"round {round}: {what}", t, 1.0)
        # A wait longer than the outage tolerance ends with it, the same kind.
        assert_unavailable(f"round {round}: acquire(timeout=5)", Timed(lambda: client.lock("g11:lock").acquire(timeout=5)), 5.0)
    client.close()


def test_g11_a_single_try_is_bounded_by_the_response_timeout(server: Server) -> None:
    client = down_client(server)
    assert client.lock("g11s:warm").acquire(timeout=1)
    client.lock("g11s:warm").release()
    server.kill()
    # Each right after a wait on the same lock, whose abandoned attempt is still being settled in
    # the background: the single try does not wait for that longer than its own bound.
    for round in range(2):
        for kind in KIND_IDS:
            lock = FACTORY[kind](client, f"g11s:{kind}")
            with pytest.raises(crosslock.RedisUnavailableError):
                lock.acquire(timeout=0.3)
            assert_unavailable(
                f"round {round}: {kind} acquire(blocking=False)", Timed(lambda: lock.acquire(blocking=False)), RESPONSE
            )
        assert_unavailable(
            f"round {round}: semaphore acquire(blocking=False)",
            Timed(lambda: client.semaphore("g11s:sem").acquire(blocking=False)),
            RESPONSE,
        )
        assert_unavailable(
            f"round {round}: permit_expirable_semaphore acquire(blocking=False)",
            Timed(lambda: client.permit_expirable_semaphore("g11s:pes").acquire(blocking=False)),
            RESPONSE,
        )
    client.close()


# -- G12: release after lost -----------------------------------------------------------------


def test_g12_the_release_of_a_hold_known_lost_raises_the_loss_at_once(server: Server) -> None:
    client = crosslock.connect(server.url, connect_timeout=2, response_timeout=2.0)
    locks = [FACTORY[kind](client, f"g12:{kind}") for kind in KIND_IDS]
    for lock in locks:
        assert lock.acquire(timeout=5, lease=0.5)
    server.kill()
    wait_until(lambda: all(lock.lost for lock in locks), timeout=10, what="every hold told lost")
    for kind, lock in zip(KIND_IDS, locks):
        started = time.monotonic()
        with pytest.raises(crosslock.LockLostError):
            lock.release()
        took = time.monotonic() - started
        assert took < 1.0, f"{kind}: a release of a hold known lost waited {took:.2f}s for Redis"
    client.close()
