"""Test helpers: a throwaway redis-server, a tiny raw RESP client, and bounded polling.

No Redis client library is needed: :class:`Raw` speaks RESP2 over a socket, which is all the tests
need to look at the raw layout (HGETALL, PTTL, PUBSUB NUMSUB) and to subscribe like a plain client.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, Callable, Optional

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01, what: str = "") -> Any:
    """Polls ``predicate`` until it returns something truthy (returned), or fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


class RedisServer:
    """A redis-server on a free 127.0.0.1 port, without persistence, stopped by :meth:`stop`."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="crosslock-redis-")
        last_error = ""
        for _ in range(5):  # a free port can be taken between the probe and the bind: retry
            self.port = free_port()
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no", "--loglevel", "warning"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with Raw(self.port, timeout=0.5) as r:
                        if r.command("PING") == "PONG":
                            return
                except OSError:
                    time.sleep(0.02)
            last_error = self.process.stdout.read().decode(errors="replace") if self.process.poll() is not None else "no PONG"
            self.process.kill()
            self.process.wait()
        raise RuntimeError(f"redis-server did not start: {last_error}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def raw(self) -> Raw:
        return Raw(self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RespError(Exception):
    pass


class Raw:
    """A plain RESP2 connection: ``command("HGETALL", key)`` returns str / int / list / None."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, *args: Any) -> None:
        parts = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(parts))

    def read(self) -> Any:
        line = self.file.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode(errors="surrogateescape")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    def command(self, *args: Any) -> Any:
        self.send(*args)
        return self.read()

    # -- conveniences ------------------------------------------------------------------------

    def hgetall(self, key: str) -> dict[str, str]:
        flat = self.command("HGETALL", key)
        return dict(zip(flat[::2], flat[1::2]))

    def numsub(self, channel: str) -> int:
        return int(self.command("PUBSUB", "NUMSUB", channel)[1])

    def subscribe(self, channel: str) -> None:
        reply = self.command("SUBSCRIBE", channel)
        assert reply[0] == "subscribe", reply

    def next_message(self, timeout: float = 5.0) -> Optional[list[Any]]:
        """The next pub/sub push (``["message", channel, payload]``), or ``None`` on timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.read()
        except (socket.timeout, TimeoutError):
            return None


def channel(name: str) -> str:
    """Redisson's release channel of lock ``name``."""
    return f"redisson_lock__channel:{{{name}}}" if "{" not in name else f"redisson_lock__channel:{name}"


def python_env() -> dict[str, str]:
    """The environment for a child Python process that imports crosslock as the tests do."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


async def poll(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """:func:`wait_until` for asyncio tests: polls ``predicate`` without blocking the event loop
    until it returns something truthy (returned), or fails after ``timeout``."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)
