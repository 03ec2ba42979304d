"""A process holding locks while the fault suite injects faults.

    worker.py soak URL KIND NAME ID SECONDS
        For SECONDS: acquire; enter the critical section through the exclusion detector (``SET
        inside:NAME ID NX``; if someone is already inside, print ``DOUBLE <them>`` and exit 3);
        bump the non-atomic counter ``counter:NAME`` (GET, then SET +1) and print ``INC``; leave
        (delete ``inside:NAME`` if it is still ours); release. Redis being away (a restart, a
        killed connection) is waited out. Prints ``DONE <increments>`` at the end.
    worker.py hold URL KIND NAME
        Acquire (watchdog), print ``HELD``, then obey stdin lines: ``check`` prints ``LOST`` or
        ``HELD``; ``release`` releases and prints ``RELEASED`` or ``REFUSED <error class>``, and
        exits. The lost-lock callback prints ``ONLOST``.
    worker.py paused URL KIND NAME LEASE
        Acquire (with a lease of LEASE seconds, or the watchdog if ``-``), print ``HELD``, then
        wait for one stdin line (the test stops this process meanwhile and sends the line before
        it resumes it); the first statement after reading it reads ``lost`` and prints ``FIRST
        <lost> <on_lost ran>``, then it releases and prints ``RELEASED`` or ``REFUSED <error
        class>``, then ``AFTER <lost> <on_lost ran>`` (waiting up to 5 s for on_lost), and exits.

The detector trusts nothing of crosslock: it is a plain key in the same Redis, written with
plain commands. Environment: $WATCHDOG (seconds, default 1.5), $FAIR_WAIT (seconds, default 1).
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests-py"))

import crosslock  # noqa: E402
from crosslock import RedisUnavailableError  # noqa: E402
from support import Raw, RespError  # noqa: E402

FACTORIES = {
    "lock": lambda c, n: c.lock(n, on_lost=on_lost),
    "fair_lock": lambda c, n: c.fair_lock(n, on_lost=on_lost),
    "spin_lock": lambda c, n: c.spin_lock(n, on_lost=on_lost),
    "fenced_lock": lambda c, n: c.fenced_lock(n, on_lost=on_lost),
    "non_reentrant_lock": lambda c, n: c.non_reentrant_lock(n, on_lost=on_lost),
    "non_reentrant_fair_lock": lambda c, n: c.non_reentrant_fair_lock(n, on_lost=on_lost),
    "write_lock": lambda c, n: c.read_write_lock(n, on_lost=on_lost).write_lock(),
    "read_lock": lambda c, n: c.read_write_lock(n, on_lost=on_lost).read_lock(),
}

# Deletes the detector key only if it is still ours (a lost holder must not erase a rival's).
LEAVE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def on_lost(_lock: object) -> None:
    print("ONLOST", flush=True)


class Plain:
    """A plain Redis connection that reconnects (and retries) until the server answers, also
    while a restarted server is still loading its AOF (it answers ``LOADING`` then)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.raw: Raw | None = None

    def __call__(self, *args: object) -> object:
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.raw is None:
                    self.raw = Raw(self.port, timeout=2)
                return self.raw.command(*args)
            except RespError as e:
                if not str(e).startswith("LOADING") or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            except OSError:
                if self.raw is not None:
                    try:
                        self.raw.close()
                    except OSError:
                        pass
                self.raw = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def connect(url: str) -> crosslock.Client:
    deadline = time.monotonic() + 30
    while True:
        try:
            return crosslock.connect(
                url,
                watchdog_timeout=float(os.environ.get("WATCHDOG", "1.5")),
                fair_lock_wait_timeout=float(os.environ.get("FAIR_WAIT", "1")),
                response_timeout=1.0,
            )
        except RedisUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def soak(url: str, kind: str, name: str, me: str, seconds: float) -> None:
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    plain = Plain(port)
    client = connect(url)
    lock = FACTORIES[kind](client, name)
    print("READY", flush=True)
    increments = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            # a short wait: a fair waiter killed while queued keeps its place for about wait x position
            if not lock.acquire(timeout=1):
                continue
        except RedisUnavailableError:
            time.sleep(0.02)
            continue
        try:
            if plain("SET", f"inside:{name}", me, "NX") != "OK":
                # (a SET whose reply a killed connection lost is sent again: it finds our own mark)
                other = plain("GET", f"inside:{name}")
                if other != me:
                    print(f"DOUBLE {me} found {other} inside", flush=True)
                    os._exit(3)
            value = int(plain("GET", f"counter:{name}") or 0)
            plain("SET", f"counter:{name}", str(value + 1))
            increments += 1
            print("INC", flush=True)
            plain("EVAL", LEAVE, "1", f"inside:{name}", me)
        finally:
            try:
                lock.release()
            except crosslock.LockLostError:
                print("LOSTREL", flush=True)
            except RedisUnavailableError:
                pass  # unanswered: it expires after its lease at worst
    client.close()
    print(f"DONE {increments}", flush=True)


def hold(url: str, kind: str, name: str) -> None:
    client = connect(url)
    lock = FACTORIES[kind](client, name)
    lock.acquire()
    print("HELD", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "check":
            print("LOST" if lock.lost else "HELD", flush=True)
        elif command == "release":
            try:
                lock.release()
                print("RELEASED", flush=True)
            except crosslock.CrosslockError as e:
                print(f"REFUSED {type(e).__name__}", flush=True)
            break
    client.close()


def paused(url: str, kind: str, name: str, lease: str) -> None:
    client = connect(url)
    told: list[object] = []
    if kind in ("read_lock", "write_lock"):
        rw = client.read_write_lock(name, on_lost=told.append)
        lock = rw.read_lock() if kind == "read_lock" else rw.write_lock()
    else:
        lock = getattr(client, kind)(name, on_lost=told.append)
    lock.acquire(lease=None if lease == "-" else float(lease))
    print("HELD", flush=True)
    sys.stdin.readline()
    # The first statement after the pause: nothing may have told the holder yet but the clock.
    first, ran = lock.lost, bool(told)
    print(f"FIRST {first} {ran}", flush=True)
    try:
        lock.release()
        print("RELEASED", flush=True)
    except crosslock.CrosslockError as e:
        print(f"REFUSED {type(e).__name__}", flush=True)
    deadline = time.monotonic() + 5
    while not told and time.monotonic() < deadline:
        time.sleep(0.01)
    print(f"AFTER {lock.lost} {bool(told)}", flush=True)
    client.close()


def main() -> None:
    mode, url, kind, name = sys.argv[1:5]
    if mode == "soak":
        soak(url, kind, name, sys.argv[5], float(sys.argv[6]))
    elif mode == "hold":
        hold(url, kind, name)
    elif mode == "paused":
        paused(url, kind, name, sys.argv[5])
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
