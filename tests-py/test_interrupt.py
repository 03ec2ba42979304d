"""Ctrl-C (SIGINT) on a Python process blocked in acquire: KeyboardInterrupt promptly, and nothing
left in Redis — no lock, no waiter, no subscription."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

import crosslock
from support import channel, python_env, wait_until

BLOCKED_CHILD = textwrap.dedent(
    """
    import signal, sys, time, crosslock
    # Ctrl-C raises KeyboardInterrupt even when this test runs in a background job, whose children
    # inherit SIGINT ignored (Python keeps an ignored SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    url, name, how = sys.argv[1], sys.argv[2], sys.argv[3]
    client = crosslock.connect(url)
    lock = client.lock(name)
    print("WAITING", client.holder(), flush=True)
    try:
        if how == "acquire":
            lock.acquire()
        elif how == "timeout":
            lock.acquire(timeout=60)
        else:
            with lock.acquired(timeout=60):
                pass
        print("ACQUIRED", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", lock.is_held(), flush=True)
    # The client still works after the interrupt.
    other = client.lock(name + ":after")
    assert other.acquire(timeout=5)
    other.release()
    print("STILL-WORKS", flush=True)
    sys.stdin.readline()  # stay alive until the test has looked at Redis
    """
)


@pytest.mark.parametrize("how", ["acquire", "timeout", "acquired"])
def test_sigint_interrupts_a_blocked_acquire_and_leaves_nothing(url, raw, how):
    name = f"interrupt-{how}"
    holder = crosslock.connect(url)
    child = None
    try:
        assert holder.lock(name).acquire(lease=60)
        child = subprocess.Popen(
            [sys.executable, "-c", BLOCKED_CHILD, url, name, how],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=python_env(),
        )
        first = child.stdout.readline().split()
        assert first[:1] == ["WAITING"], first
        child_holder = first[1]
        wait_until(lambda: raw.numsub(channel(name)) == 1, what="the child to wait on the channel")

        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().split()
        took = time.monotonic() - sent
        assert line[:1] == ["INTERRUPTED"], line
        assert took < 5, f"KeyboardInterrupt took {took:.1f}s"  # promptly: it polls every 50 ms
        assert line[1:] == ["False"]  # not held, seen from inside the child

        # Seen from Redis while the child still lives: no subscriber (core unsubscribes right
        # after the cancelled wait ends), the lock unchanged.
        wait_until(lambda: raw.numsub(channel(name)) == 0, timeout=5, what="the child to unsubscribe")
        assert raw.hgetall(name) == {holder.holder(): "1"}
        assert child_holder not in raw.hgetall(name)
        assert child.stdout.readline().strip() == "STILL-WORKS"

        # Released by its holder, the lock goes to whoever asks next, not to the interrupted child.
        holder.lock(name).release()
        with crosslock.connect(url) as third:
            assert third.lock(name).acquire(blocking=False)
            assert raw.hgetall(name) == {third.holder(): "1"}
            third.lock(name).release()

        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(10) == 0
        assert raw.numsub(channel(name)) == 0
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        if child is not None:
            child.stdout.close()
            child.stdin.close()
        holder.close()
