"""The fault-injection harness: redis-servers that can be restarted, paused, frozen and
partitioned; a loopback TCP proxy; the lock kinds every case runs over; holder processes with an
exclusion detector that does not trust the library.

Everything here is plain Python and a real ``redis-server``; nothing is mocked.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests-py"))

import crosslock  # noqa: E402
from support import REDIS_SERVER, Raw, RespError, debug_command_args, free_port, python_env, reap_at_exit, wait_until  # noqa: E402,F401

# -- the kinds every case runs over --------------------------------------------------------------

#: Every lock-family kind, as ``(id, factory(client, name))``. A new lock type is added here and
#: every fault case runs against it.
LOCK_KINDS: list[tuple[str, Callable[[crosslock.Client, str], Any]]] = [
    ("lock", lambda c, n: c.lock(n)),
    ("fair_lock", lambda c, n: c.fair_lock(n)),
    ("spin_lock", lambda c, n: c.spin_lock(n)),
    ("fenced_lock", lambda c, n: c.fenced_lock(n)),
    ("non_reentrant_lock", lambda c, n: c.non_reentrant_lock(n)),
    ("non_reentrant_fair_lock", lambda c, n: c.non_reentrant_fair_lock(n)),
    ("write_lock", lambda c, n: c.read_write_lock(n).write_lock()),
    ("read_lock", lambda c, n: c.read_write_lock(n).read_lock()),
]

KIND_IDS = [k for k, _ in LOCK_KINDS]
FACTORY = dict(LOCK_KINDS)

def make(client: crosslock.Client, kind: str, name: str, on_lost: Callable[[Any], Any]) -> Any:
    """The lock of ``kind`` named ``name`` whose lost-lock callback is ``on_lost``."""
    if kind in ("read_lock", "write_lock"):
        rw = client.read_write_lock(name, on_lost=on_lost)
        return rw.read_lock() if kind == "read_lock" else rw.write_lock()
    return getattr(client, kind)(name, on_lost=on_lost)


#: The kind that excludes a holder of ``kind`` (a read lock is shared by readers: a writer waits).
RIVAL = {k: ("write_lock" if k == "read_lock" else k) for k in KIND_IDS}

#: Every kind that counts re-entries (the non-reentrant locks refuse them).
REENTRANT = [k for k in KIND_IDS if not k.startswith("non_reentrant")]

#: The kinds that queue their waiters (a fair lock's queue outlives a killed waiter for a while).
FAIR = ["fair_lock", "non_reentrant_fair_lock"]

# -- redis-server -------------------------------------------------------------------------------


class Server:
    """A redis-server on a free loopback port that keeps its port and directory across
    :meth:`restart`, so clients reconnect to "the same" server."""

    def __init__(self, *args: str, aof: bool = False) -> None:
        self.dir = tempfile.mkdtemp(prefix="crosslock-faults-")
        self.args = list(args)
        self.aof = aof
        self.port = free_port()
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", self.dir,
             "--daemonize", "no", "--loglevel", "warning", *debug_command_args(), *persistence, *self.args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._pong, timeout=10, what=f"redis-server on {self.port}")
        reap_at_exit(self.process.pid, self.dir)

    def _pong(self) -> bool:
        try:
            with Raw(self.port, timeout=0.5) as r:
                return r.command("PING") == "PONG"
        except RespError as e:
            return "NOAUTH" in str(e)  # up, and asking for a password
        except Exception:
            return False

    def raw(self) -> Raw:
        return Raw(self.port)

    def command(self, *args: Any) -> Any:
        with Raw(self.port) as r:
            return r.command(*args)

    def kill(self) -> None:
        """kill -9: whatever was not persisted is gone."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def keys(self) -> list[str]:
        return sorted(self.command("KEYS", "*"))

    def channels(self) -> list[str]:
        return sorted(self.command("PUBSUB", "CHANNELS", "*"))

    def script_calls(self) -> int:
        """How many scripts the server has run (EVAL, EVALSHA, FCALL), from INFO commandstats."""
        info = self.command("INFO", "commandstats")
        calls = 0
        for line in info.splitlines():
            if line.startswith(("cmdstat_eval", "cmdstat_evalsha", "cmdstat_fcall")):
                calls += int(line.split("calls=", 1)[1].split(",", 1)[0])
        return calls


# -- a loopback TCP proxy that can partition -------------------------------------------------------


class Proxy:
    """Forwards 127.0.0.1:<port> to a redis-server. :meth:`partition` holds every byte in both
    directions (connections stay open, nothing is delivered: a network partition, not a reset);
    :meth:`heal` delivers what was held and lets everything through again."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.closed = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def partition(self) -> None:
        self.open.clear()

    def heal(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.closed = True
        self.open.set()
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                down.close()
                continue
            self.sockets += [down, up]
            threading.Thread(target=self._pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self.closed:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            self.open.wait()
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# -- holder processes ----------------------------------------------------------------------------

WORKER = HERE / "worker.py"


class Worker:
    """A holder process (tests-faults/worker.py) and its line protocol."""

    def __init__(self, *args: str, env: Optional[dict[str, str]] = None) -> None:
        self.args = args
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**python_env(), **(env or {})},
        )
        self.buffer = b""
        self.err: Optional[str] = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def expect(self, prefix: str, timeout: float = 20.0) -> str:
        """Waits for a line starting with ``prefix``; returns the rest of it."""
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while True:
            for i, line in enumerate(self.lines):
                if line.startswith(prefix):
                    del self.lines[: i + 1]
                    return line[len(prefix):].strip()
            if self.process.stdout.closed:
                raise AssertionError(f"worker {self.args} ended without printing {prefix!r}; got {self.lines}; "
                                     f"stderr: {self.stderr()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"worker {self.args} did not print {prefix!r} in {timeout}s; "
                                     f"got {self.lines}; stderr: {self.stderr()}")
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    if self.process.poll() is not None and not any(l.startswith(prefix) for l in self.lines):
                        raise AssertionError(f"worker {self.args} exited {self.process.returncode} before {prefix!r}; "
                                             f"got {self.lines}; stderr: {self.stderr()}")
                    time.sleep(0.01)
                    continue
                self.buffer += chunk
                *complete, self.buffer = self.buffer.split(b"\n")
                self.lines += [c.decode() for c in complete]

    def stderr(self) -> str:
        if self.err is not None:
            return self.err
        if self.process.poll() is None or self.process.stderr is None:
            return "(still running)"
        return self.process.stderr.read().decode(errors="replace")[-2000:]

    def send(self, line: str = "") -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self._close()

    def finish(self, timeout: float = 20.0) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker {self.args} did not exit in {timeout}s")
        self._close()
        return code

    def _close(self) -> None:
        """Keeps what the process printed (in :attr:`lines`), then closes its pipes."""
        if self.process.stdout is not None and not self.process.stdout.closed:
            rest = self.buffer + self.process.stdout.read()
            self.buffer = b""
            self.lines += [l for l in rest.decode(errors="replace").split("\n") if l]
        if self.process.stderr is not None and not self.process.stderr.closed:
            self.err = self.process.stderr.read().decode(errors="replace")[-2000:]
        for f in (self.process.stdin, self.process.stdout, self.process.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def elapsed(start: float) -> float:
    return time.monotonic() - start


class Timed:
    """Runs ``fn`` on a thread and records how long it took and what it returned or raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.seconds = 0.0
        self.finished_at = 0.0

        def run() -> None:
            start = time.monotonic()
            try:
                self.result = fn()
            except BaseException as e:  # noqa: BLE001 - recorded for the test to assert on
                self.error = e
            self.finished_at = time.monotonic()
            self.seconds = self.finished_at - start

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 30.0) -> "Timed":
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call never returned"
        return self


def no_leaks(server: Server, allowed: Iterator[str] | list[str] = ()) -> None:
    """Nothing left behind: no key but ``allowed`` and fencing-token counters (which outlive their
    locks by design), no subscribed channel (both polled for a moment, since the last unsubscribe
    may still be on its way)."""
    allowed = set(allowed)

    def left() -> list[str]:
        return [k for k in server.keys() if k not in allowed and not k.startswith("redisson_lock_token:")]

    try:
        wait_until(lambda: not left(), timeout=10)
        wait_until(lambda: not server.channels(), timeout=10)
    except AssertionError:
        raise AssertionError(f"left behind: keys {left()}, subscriptions {server.channels()}") from None
