"""A Python process taking part in a cross-language test.

    py_worker.py URL hold NAME          acquire, print "HELD <monotonic-ns>", wait for a line on stdin,
                                        release, print "RELEASED <monotonic-ns>"
    py_worker.py URL wait NAME          acquire (wait ≤ 30 s), print "ACQUIRED <monotonic-ns>", release
    py_worker.py URL counter NAME KEY N N × (acquire, non-atomic GET/SET of KEY, release), print "DONE"
    py_worker.py URL tokens NAME N      N × (acquire a fenced lock, print "TOKEN <monotonic-ns> <token>",
                                        release), then "DONE"
    py_worker.py URL chaos NAME SECONDS 3 threads and 3 asyncio tasks take NAME:x (lock), NAME:f (fair
                                        lock) and NAME:rw (read or write) at random, each wait cut
                                        short at random (a timeout, a cancel); inside, they check
                                        through Redis that no one else is in; print "DONE <ok> <bad>"
    py_worker.py URL permits NAME SECONDS  the same with 1 or 2 of NAME:s's permits (a semaphore of
                                        3) or a permit of NAME:p (a permit-expirable semaphore of
                                        2); inside, they count the permits in use in Redis

The lock type comes from $CROSSLOCK_KIND (lock, fair_lock, spin_lock, fenced_lock,
non_reentrant_lock, read_lock, write_lock; default lock); $CROSSLOCK_FAIR_WAIT sets the client's
fair_lock_wait_timeout (seconds); $CROSSLOCK_WAIT the wait limit of "wait" (seconds, default 30,
"inf" for none).
"""

import asyncio
import os
import random
import socket
import sys
import threading
import time

import crosslock


class Raw:
    """Just enough RESP for GET and SET, so workers need no Redis client library."""

    def __init__(self, url: str) -> None:
        host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = self.sock.makefile("rb")

    def call(self, *args: str):
        out = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        self.sock.sendall(out.encode())
        line = self.buf.readline().rstrip(b"\r\n")
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            data = self.buf.read(n + 2)[:-2]
            return data.decode()
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line[1:].decode()


def make(client: crosslock.Client, kind: str, name: str):  # type: ignore[no-untyped-def]
    if kind in ("read_lock", "write_lock"):
        rw = client.read_write_lock(name)
        return rw.read_lock() if kind == "read_lock" else rw.write_lock()
    return getattr(client, kind)(name)


def run_three_and_three(thread, task, errors: list[BaseException]) -> None:  # type: ignore[no-untyped-def]
    """Runs `thread` in 3 threads and `task` in 3 asyncio tasks at once; re-raises the first
    error a thread put in `errors`."""

    async def tasks() -> None:
        await asyncio.gather(*(task() for _ in range(3)))

    threads = [threading.Thread(target=thread) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        asyncio.run(tasks())
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def chaos(client: crosslock.Client, url: str, name: str, seconds: float) -> None:
    """See the module docs. Any error ends the process with a traceback (a non-zero exit)."""
    end = time.monotonic() + seconds
    counts = {"ok": 0, "bad": 0}
    counted = threading.Lock()
    errors: list[BaseException] = []

    def pick():  # type: ignore[no-untyped-def]
        k = random.randrange(4)
        if k == 0:
            return "x", client.lock(f"{name}:x"), "w"
        if k == 1:
            return "f", client.fair_lock(f"{name}:f"), "w"
        rw = client.read_write_lock(f"{name}:rw")
        return ("rw", rw.write_lock(), "w") if k == 2 else ("rw", rw.read_lock(), "r")

    def inside(raw: Raw, part: str, mode: str) -> None:
        # Writers count themselves in NAME:<part>:w, readers in NAME:rw:r; a writer must be alone.
        if mode == "r":
            raw.call("INCR", f"{name}:rw:r")
            bad = raw.call("GET", f"{name}:rw:w") not in (None, "0")
            time.sleep(random.random() * 0.001)
            raw.call("DECR", f"{name}:rw:r")
        else:
            writers = raw.call("INCR", f"{name}:{part}:w")
            readers = raw.call("GET", f"{name}:rw:r") if part == "rw" else None
            bad = writers != "1" or readers not in (None, "0")
            time.sleep(random.random() * 0.001)
            raw.call("DECR", f"{name}:{part}:w")
        with counted:
            counts["bad" if bad else "ok"] += 1

    def thread() -> None:
        try:
            raw = Raw(url)
            while time.monotonic() < end:
                part, lock, mode = pick()
                if lock.acquire(timeout=random.random() * 0.02):
                    try:
                        inside(raw, part, mode)
                    finally:
                        lock.release()
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    async def task() -> None:
        # One task is one owner: a read cut short and then a write is the same owner's.
        raw = Raw(url)
        while time.monotonic() < end:
            part, lock, mode = pick()
            try:
                async with asyncio.timeout(random.random() * 0.02):
                    await lock.acquire_async()
            except TimeoutError:
                continue
            try:
                inside(raw, part, mode)
            finally:
                await lock.release_async()

    run_three_and_three(thread, task, errors)
    print(f"DONE {counts['ok']} {counts['bad']}", flush=True)


def permit_chaos(client: crosslock.Client, url: str, name: str, seconds: float) -> None:
    """See the module docs. Any error ends the process with a traceback (a non-zero exit)."""
    end = time.monotonic() + seconds
    counts = {"ok": 0, "bad": 0}
    counted = threading.Lock()
    errors: list[BaseException] = []
    sem = client.semaphore(f"{name}:s")
    pes = client.permit_expirable_semaphore(f"{name}:p")

    def inside(raw: Raw, part: str, permits: int) -> None:
        # NAME:<part>:used counts the permits in use: never more than the semaphore has.
        used = int(raw.call("INCRBY", f"{name}:{part}:used", str(permits)))
        time.sleep(random.random() * 0.001)
        raw.call("DECRBY", f"{name}:{part}:used", str(permits))
        with counted:
            counts["bad" if used > (3 if part == "s" else 2) else "ok"] += 1

    def thread() -> None:
        try:
            raw = Raw(url)
            while time.monotonic() < end:
                wait = random.random() * 0.02
                if random.random() < 0.5:
                    permits = random.choice((1, 2))
                    if sem.acquire(permits, timeout=wait):
                        try:
                            inside(raw, "s", permits)
                        finally:
                            sem.release(permits)
                else:
                    permit = pes.acquire(timeout=wait)
                    if permit is not None:
                        try:
                            inside(raw, "p", 1)
                        finally:
                            pes.release(permit)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    async def task() -> None:
        raw = Raw(url)
        while time.monotonic() < end:
            permits = random.choice((1, 2)) if random.random() < 0.5 else 0
            try:
                async with asyncio.timeout(random.random() * 0.02):
                    permit = await (sem.acquire_async(permits) if permits else pes.acquire_async())
            except TimeoutError:
                continue
            try:
                inside(raw, "s" if permits else "p", permits or 1)
            finally:
                await (sem.release_async(permits) if permits else pes.release_async(permit))

    run_three_and_three(thread, task, errors)
    print(f"DONE {counts['ok']} {counts['bad']}", flush=True)


def main() -> None:
    url, mode, name = sys.argv[1], sys.argv[2], sys.argv[3]
    kind = os.environ.get("CROSSLOCK_KIND", "lock")
    fair_wait = float(os.environ.get("CROSSLOCK_FAIR_WAIT", "300"))
    client = crosslock.connect(url, fair_lock_wait_timeout=fair_wait)
    lock = make(client, kind, name)
    print(f"READY {client.id}", flush=True)
    if mode == "hold":
        lock.acquire()
        print(f"HELD {time.monotonic_ns()}", flush=True)
        sys.stdin.readline()
        released = time.monotonic_ns()
        lock.release()
        print(f"RELEASED {released}", flush=True)
    elif mode == "wait":
        limit = os.environ.get("CROSSLOCK_WAIT", "30")
        if not lock.acquire(timeout=-1 if limit == "inf" else float(limit)):
            print("TIMEOUT", flush=True)
            sys.exit(1)
        print(f"ACQUIRED {time.monotonic_ns()}", flush=True)
        lock.release()
    elif mode == "tokens":
        fenced = client.fenced_lock(name)
        for _ in range(int(sys.argv[4])):
            with fenced as token:
                print(f"TOKEN {time.monotonic_ns()} {token}", flush=True)
        print("DONE", flush=True)
    elif mode == "chaos":
        chaos(client, url, name, float(sys.argv[4]))
    elif mode == "permits":
        permit_chaos(client, url, name, float(sys.argv[4]))
    elif mode == "counter":
        key, n = sys.argv[4], int(sys.argv[5])
        raw = Raw(url)
        for _ in range(n):
            with lock:
                value = int(raw.call("GET", key) or 0)
                raw.call("SET", key, str(value + 1))
        print("DONE", flush=True)
    client.close()


if __name__ == "__main__":
    main()
