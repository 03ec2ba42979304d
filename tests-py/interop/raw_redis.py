"""A tiny blocking RESP2 client, so the interop tests can look at Redis without crosslock or Redisson.

Used to check the raw lock layout (``HGETALL``, ``PTTL``), to see who is subscribed
(``PUBSUB NUMSUB``), to listen on a channel, and by the counter workers for their deliberately
non-atomic ``GET``/``SET``. No dependency beyond the standard library.

Example::

    r = RawRedis("127.0.0.1", 7001)
    r.command("SET", "k", "1")
    assert r.command("GET", "k") == "1"
    r.close()
"""

from __future__ import annotations

import socket
from typing import Any, Optional
from urllib.parse import urlparse


class RedisReplyError(Exception):
    """An error reply (``-ERR ...``) from Redis."""


class RawRedis:
    """One connection; replies are decoded as UTF-8 strings, ints, lists or ``None``."""

    def __init__(self, host: str, port: int, db: int = 0, timeout: float = 10.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._buf = b""
        if db:
            self.command("SELECT", db)

    @classmethod
    def from_url(cls, url: str, timeout: float = 10.0) -> "RawRedis":
        u = urlparse(url)
        db = int(u.path.lstrip("/") or 0)
        return cls(u.hostname or "127.0.0.1", u.port or 6379, db, timeout)

    def send(self, *args: Any) -> None:
        """Send one command without reading its reply."""
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self._sock.sendall(b"".join(out))

    def command(self, *args: Any) -> Any:
        """Send one command and return its decoded reply (raises :class:`RedisReplyError`)."""
        self.send(*args)
        return self.read()

    def read(self, timeout: Optional[float] = None) -> Any:
        """Read one reply (or one pub/sub message); ``socket.timeout`` if nothing within ``timeout``."""
        if timeout is not None:
            self._sock.settimeout(timeout)
        reply = self._parse()
        if isinstance(reply, RedisReplyError):
            raise reply
        return reply

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n + 2:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n + 2 :]
        return data

    def _parse(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._parse() for _ in range(n)]
        raise ConnectionError(f"unexpected RESP line {line!r}")

    def hgetall(self, key: str) -> dict:
        flat = self.command("HGETALL", key)
        return dict(zip(flat[::2], flat[1::2]))

    def numsub(self, channel: str) -> int:
        """How many connections are subscribed to ``channel`` (``PUBSUB NUMSUB``)."""
        return int(self.command("PUBSUB", "NUMSUB", channel)[1])

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawRedis":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
