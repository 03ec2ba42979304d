"""The lost signal right after a pause (issue 52, item 0).

A holder process frozen (SIGSTOP, standing in for a GC pause or a stalled VM) past its lease
resumes after another client has taken the lock. Its very first statement after resuming reads
``lock.lost``: that must already be true, computed from the clock, not left to the watchdog to
notice a moment later; its release raises ``LockLostError``; ``on_lost`` runs (once). Lock and
FencedLock, with a lease and with the watchdog, several runs each.
"""

from __future__ import annotations

import signal
import time

import crosslock
import pytest

from harness import Server, Worker, no_leaks

#: The holder's lease (and its watchdog timeout): short, so the pause past it is short.
LEASE = 0.5
#: How many pauses each variant goes through.
RUNS = 2


@pytest.mark.parametrize("lease", ["lease", "watchdog"])
@pytest.mark.parametrize("kind", ["lock", "fenced_lock"])
def test_p1_lost_is_true_on_the_first_read_after_a_pause_past_the_lease(server: Server, kind: str, lease: str) -> None:
    rival = crosslock.connect(server.url)
    try:
        for run in range(RUNS):
            name = f"p1:{kind}:{lease}:{run}"
            holder = Worker(
                "paused", server.url, kind, name, str(LEASE) if lease == "lease" else "-",
                env={"WATCHDOG": str(LEASE)},
            )
            try:
                holder.expect("HELD")
                holder.signal(signal.SIGSTOP)
                # Another client takes the lock once its lease has run out in Redis (the frozen
                # holder renews nothing); a fenced lock's token is then greater than the holder's.
                other = getattr(rival, kind)(name)
                assert other.acquire(timeout=10), f"run {run}: the rival never got the {kind}"
                time.sleep(0.1)
                # The line is waiting for the holder when it resumes: it reads it, then `lost`.
                holder.send("go")
                holder.signal(signal.SIGCONT)
                first = holder.expect("FIRST").split()
                assert first[0] == "True", f"run {run}: lost was {first[0]} on the first read after the pause"
                assert holder.expect("REFUSED") == "LockLostError", f"run {run}"
                after = holder.expect("AFTER").split()
                assert after == ["True", "True"], f"run {run}: after the release, lost / on_lost ran: {after}"
                assert holder.finish() == 0
                other.release()
            finally:
                holder.kill()
    finally:
        rival.close()
    no_leaks(server)
