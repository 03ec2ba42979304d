"""A Python process taking part in a cross-language test.

    py_worker.py URL hold NAME          acquire, print "HELD <monotonic-ns>", wait for a line on stdin,
                                        release, print "RELEASED <monotonic-ns>"
    py_worker.py URL wait NAME          acquire (wait ≤ 30 s), print "ACQUIRED <monotonic-ns>", release
    py_worker.py URL counter NAME KEY N N × (acquire, non-atomic GET/SET of KEY, release), print "DONE"
"""

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


def main() -> None:
    url, mode, name = sys.argv[1], sys.argv[2], sys.argv[3]
    client = crosslock.connect(url)
    lock = client.lock(name)
    print(f"READY {client.id}", flush=True)
    if mode == "hold":
        lock.acquire()
        print(f"HELD {time.monotonic_ns()}", flush=True)
        sys.stdin.readline()
        released = time.monotonic_ns()
        lock.release()
        print(f"RELEASED {released}", flush=True)
    elif mode == "wait":
        if not lock.acquire(timeout=30):
            print("TIMEOUT", flush=True)
            sys.exit(1)
        print(f"ACQUIRED {time.monotonic_ns()}", flush=True)
        lock.release()
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
