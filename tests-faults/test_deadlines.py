"""G4: a wait limit is a deadline while Redis is paused, asleep or frozen (and such a wait, which no
answer ended, raises RedisUnavailableError); a single try, a release and a query are bounded by
the response timeout.

The documented slack is 100 ms of clean-up grace plus scheduling; these cases allow SLACK on top
of the limit, because two cores run the frozen server, the waiters and everything else at once.
Every fault lasts FAULT seconds, well past each bound, so a call that waited for Redis to come back
could not pass.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import crosslock
from harness import FACTORY, KIND_IDS, RIVAL, Raw, Server, Timed, no_leaks

SLACK = 0.35
FAULT = 7.0
WAIT = 1.0
RESPONSE = 2.0


def start_fault(server: Server, fault: str) -> threading.Thread:
    """Starts ``fault`` for FAULT seconds; the returned thread ends when the server is back."""
    def run() -> None:
        if fault == "client_pause":
            server.command("CLIENT", "PAUSE", int(FAULT * 1000), "ALL")
            time.sleep(FAULT)
        elif fault == "debug_sleep":
            with Raw(server.port, timeout=FAULT + 10) as r:
                r.command("DEBUG", "SLEEP", FAULT)
        else:
            server.freeze()
            time.sleep(FAULT)
            server.thaw()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("fault", ["client_pause", "debug_sleep", "sigstop"])
def test_g4_wait_limits_are_deadlines_while_redis_does_not_answer(server: Server, fault: str) -> None:
    holder = crosslock.connect(server.url, response_timeout=RESPONSE)
    waiter = crosslock.connect(server.url, response_timeout=RESPONSE)
    held = {}
    for kind in KIND_IDS:
        lock = FACTORY[RIVAL[kind]](holder, f"g4:{kind}")
        assert lock.acquire(timeout=5)
        held[kind] = lock
    semaphore = waiter.semaphore("g4:semaphore")
    assert semaphore.try_set_permits(0)
    latch = waiter.count_down_latch("g4:latch")
    assert latch.try_set_count(1)
    time.sleep(0.05)

    faulted = start_fault(server, fault)
    time.sleep(0.2)  # the server is not answering from here on
    waits = {kind: Timed(lambda k=kind: FACTORY[k](waiter, f"g4:{k}").acquire(timeout=WAIT)) for kind in KIND_IDS}
    waits["semaphore"] = Timed(lambda: semaphore.acquire(timeout=WAIT))
    waits["latch"] = Timed(lambda: latch.wait(timeout=WAIT))
    single = Timed(lambda: FACTORY["lock"](waiter, "g4:lock").acquire(blocking=False))

    async def waiting_tasks() -> list[bool]:
        return await asyncio.gather(*(FACTORY[k](waiter, f"g4:{k}").acquire_async(timeout=WAIT) for k in KIND_IDS))
    tasks = Timed(lambda: asyncio.run(waiting_tasks()))

    # No attempt got an answer: an outage, never "busy" (False).
    for what, t in waits.items():
        t.join()
        assert t.seconds <= WAIT + SLACK, f"{what}: a {WAIT}s wait returned after {t.seconds:.2f}s"
        assert isinstance(t.error, crosslock.RedisUnavailableError), f"{what}: {t.result!r} {t.error!r}"
    tasks.join()
    assert isinstance(tasks.error, crosslock.RedisUnavailableError), (tasks.result, tasks.error)
    assert tasks.seconds <= WAIT + SLACK, f"asyncio waits returned after {tasks.seconds:.2f}s"
    single.join()
    assert single.seconds <= RESPONSE + SLACK, f"a single try took {single.seconds:.2f}s"
    assert isinstance(single.error, crosslock.RedisUnavailableError), (single.result, single.error)

    if fault != "client_pause":  # a paused server still answers what does not write
        # on this thread: a lock's owner is the thread that took it
        started = time.monotonic()
        with pytest.raises(crosslock.RedisUnavailableError):
            held["lock"].release()
        took = time.monotonic() - started
        assert took <= RESPONSE + SLACK, f"a release took {took:.2f}s"
        started = time.monotonic()
        with pytest.raises(crosslock.RedisUnavailableError):
            held["fair_lock"].locked()
        took = time.monotonic() - started
        assert took <= RESPONSE + SLACK, f"a query took {took:.2f}s"
        del held["lock"]

    faulted.join(FAULT + 10)
    # Whatever an abandoned attempt won once the server answered again was given back: the rivals
    # still hold, and once they let go nothing is left.
    for kind, lock in held.items():
        lock.release()
    holder.close()
    waiter.close()
    no_leaks(server, allowed=["g4:semaphore", "g4:latch", "g4:lock"])
