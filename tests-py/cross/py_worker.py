"""A Python process taking part in a cross-language test.

    py_worker.py URL hold NAME          acquire, print "HELD <monotonic-ns>", wait for a line on stdin,
                                        release, print "RELEASED <monotonic-ns>"
    py_worker.py URL wait NAME          acquire (wait ≤ 30 s), print "ACQUIRED <monotonic-ns>", release
    py_worker.py URL counter NAME KEY N N × (acquire, non-atomic GET/SET of KEY, release), print "DONE"
    py_worker.py URL tokens NAME N      N × (acquire a fenced lock, print "TOKEN <monotonic-ns> <token>",
                                        release), then "DONE"

The lock type comes from $CROSSLOCK_KIND (lock, fair_lock, spin_lock, fenced_lock,
non_reentrant_lock, read_lock, write_lock; default lock); $CROSSLOCK_FAIR_WAIT sets the client's
fair_lock_wait_timeout (seconds); $CROSSLOCK_WAIT the wait limit of "wait" (seconds, default 30,
"inf" for none).
"""

import os
import socket
import sys
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
