"""Drive the real Redisson client (``tests-java/driver``) from Python tests.

The driver is a small Java program around Redisson 4.7.0 (see ``tests-java/README.md``). It prints
``<nanos> READY``, then reads one command per line on stdin and answers every command with one line::

    <nanos> OK [result]
    <nanos> ERR <ExceptionSimpleName> [message]

``<nanos>`` is Java's ``System.nanoTime()`` = CLOCK_MONOTONIC, the clock of :func:`time.monotonic_ns`,
so a Java timestamp can be compared with a Python one taken on the same machine.

Example::

    ensure_built()
    with JavaDriver.start() as java:
        java.connect("redis://127.0.0.1:7001/0")
        java.ok("lockLease orders 60000")
        assert java.ok("isLocked orders") == "true"
        java.ok("unlock orders")

Commands run in order on one Java thread, so a blocking command (``lock``, ``tryLockWait``,
``counter``) delays the replies to everything sent after it. :meth:`JavaDriver.send` sends without
waiting, :meth:`JavaDriver.reply` collects the next answer, :meth:`JavaDriver.has_reply` tells whether
one has arrived yet (i.e. whether Java is still blocked).
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO / "tests-java"
DRIVER = JAVA_DIR / "driver"

#: Bound for commands that should answer at once (Redis round trips on loopback).
QUICK = 15.0


class JavaDriverError(AssertionError):
    """The Java driver is missing, did not build, died, timed out or answered ERR unexpectedly.

    An ``AssertionError`` so that pytest reports it as a test failure with its message.
    """


_build_lock = threading.Lock()
_built = False


def ensure_built() -> None:
    """Build ``tests-java`` once per process (``bash tests-java/build.sh``; a no-op when up to date).

    Raises :class:`JavaDriverError` (never skips) when ``java`` or ``mvn`` is missing or the build
    fails: the Redisson interop cases are part of the test suite, not optional.
    """
    global _built
    with _build_lock:
        if _built:
            return
        missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
        if missing:
            raise JavaDriverError(
                f"{' and '.join(missing)} not found on PATH: the Redisson interop tests need a JDK 17+ and "
                "Maven to build tests-java (Debian: apt-get install openjdk-17-jdk-headless maven), "
                "then run ./dev test again"
            )
        try:
            done = subprocess.run(
                ["bash", str(JAVA_DIR / "build.sh")],
                capture_output=True,
                text=True,
                timeout=900,
            )
        except subprocess.TimeoutExpired as exc:
            raise JavaDriverError(f"tests-java/build.sh did not finish within {exc.timeout} s") from None
        if done.returncode != 0:
            raise JavaDriverError(
                f"tests-java/build.sh failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        _built = True


@dataclass(frozen=True)
class Reply:
    """One answer line of the driver."""

    nanos: int
    """``System.nanoTime()`` when the command finished (CLOCK_MONOTONIC, like ``time.monotonic_ns()``)."""
    ok: bool
    value: Optional[str]
    """The result after ``OK`` (``None`` for a bare ``OK``)."""
    error: Optional[str]
    """The Java exception's simple name after ``ERR``."""
    message: Optional[str]
    """The Java exception's message after ``ERR`` (``None`` when empty)."""
    command: str
    line: str


class JavaDriver:
    """One ``tests-java/driver`` process (one JVM, at most one Redisson client).

    Use :meth:`start`; always :meth:`close` it (it is a context manager), which kills the JVM if it
    does not quit promptly.
    """

    def __init__(self, proc: subprocess.Popen, ready_timeout: float) -> None:
        self._proc = proc
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stderr: list[str] = []
        self._sent: list[str] = []
        self._answered = 0
        self.client_id: Optional[str] = None
        self._threads = [
            threading.Thread(target=self._pump_stdout, name="java-driver-stdout", daemon=True),
            threading.Thread(target=self._pump_stderr, name="java-driver-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()
        line = self._next_line(ready_timeout, "READY")
        parts = line.split()
        if len(parts) != 2 or parts[1] != "READY":
            self.kill()
            raise JavaDriverError(f"java driver: expected '<nanos> READY', got {line!r}{self._stderr_tail()}")
        self.ready_nanos = int(parts[0])

    @classmethod
    def start(cls, ready_timeout: float = 30.0) -> "JavaDriver":
        """Build if needed, spawn the driver and wait (at most ``ready_timeout`` s) for ``READY``."""
        ensure_built()
        proc = subprocess.Popen(
            ["bash", str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=str(JAVA_DIR),
        )
        try:
            return cls(proc, ready_timeout)
        except BaseException:
            proc.kill()
            proc.wait(5)
            raise

    # -- reading -------------------------------------------------------------------------------

    def _pump_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # EOF

    def _pump_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line.rstrip("\n"))
            del self._stderr[:-40]

    def _stderr_tail(self) -> str:
        if not self._stderr:
            return ""
        return "\njava driver stderr (tail):\n  " + "\n  ".join(self._stderr[-15:])

    def _next_line(self, timeout: float, waiting_for: str) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise JavaDriverError(
                f"java driver: no answer to {waiting_for!r} within {timeout} s{self._stderr_tail()}"
            ) from None
        if line is None:
            self._lines.put(None)  # stay at EOF
            code = self._proc.poll()
            raise JavaDriverError(
                f"java driver exited (code {code}) while waiting for {waiting_for!r}{self._stderr_tail()}"
            )
        return line

    # -- commands ------------------------------------------------------------------------------

    def send(self, command: str) -> None:
        """Send one command without waiting for its answer (collect it later with :meth:`reply`)."""
        if "\n" in command:
            raise ValueError("one command per call")
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise JavaDriverError(f"java driver: cannot send {command!r}: {exc}{self._stderr_tail()}") from None
        self._sent.append(command)

    def reply(self, timeout: float = QUICK) -> Reply:
        """The answer to the oldest command still unanswered, waiting at most ``timeout`` s."""
        if self._answered >= len(self._sent):
            raise JavaDriverError("java driver: reply() without an outstanding command")
        command = self._sent[self._answered]
        line = self._next_line(timeout, command)
        self._answered += 1
        parts = line.split(" ", 3)
        try:
            nanos = int(parts[0])
        except ValueError:
            raise JavaDriverError(f"java driver: malformed answer {line!r} to {command!r}") from None
        if len(parts) >= 2 and parts[1] == "OK":
            value = " ".join(parts[2:]) or None
            return Reply(nanos, True, value, None, None, command, line)
        if len(parts) >= 3 and parts[1] == "ERR":
            return Reply(nanos, False, None, parts[2], parts[3] if len(parts) > 3 else None, command, line)
        raise JavaDriverError(f"java driver: malformed answer {line!r} to {command!r}")

    def has_reply(self) -> bool:
        """True if an answer (or EOF) has arrived that :meth:`reply` has not returned yet."""
        return not self._lines.empty()

    def call(self, command: str, timeout: float = QUICK) -> Reply:
        """Send ``command`` and return its answer (OK or ERR)."""
        self.send(command)
        return self.reply(timeout)

    def ok(self, command: str, timeout: float = QUICK) -> Optional[str]:
        """Send ``command``, require ``OK`` and return its result (``None`` for a bare ``OK``)."""
        return self.expect_ok(self.call(command, timeout))

    def expect_ok(self, reply: Reply) -> Optional[str]:
        """Return ``reply.value``, or raise :class:`JavaDriverError` if it is an ``ERR``."""
        if not reply.ok:
            raise JavaDriverError(f"java driver: {reply.command!r} failed: {reply.line}{self._stderr_tail()}")
        return reply.value

    def connect(self, url: str, watchdog_ms: Optional[int] = None) -> str:
        """Create the Redisson client (``Redisson.create``); returns and remembers its client id."""
        cmd = f"connect {url}" if watchdog_ms is None else f"connect {url} {int(watchdog_ms)}"
        client_id = self.ok(cmd, timeout=60)
        assert client_id, "connect returned no client id"
        self.client_id = client_id
        return client_id

    def holder(self) -> str:
        """Redisson's holder field for the driver thread: ``<client-uuid>:<java-thread-id>``."""
        assert self.client_id, "connect first"
        return f"{self.client_id}:{self.ok('threadid')}"

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._proc.pid

    def kill(self) -> None:
        """SIGKILL the JVM (a crashed Java holder: its locks stay until their lease ends)."""
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self, timeout: float = 5.0) -> None:
        """``quit`` (Redisson shutdown) when idle, else kill; the process is gone afterwards."""
        try:
            if self._proc.poll() is None and self._answered == len(self._sent):
                try:
                    self.send("quit")
                    self._proc.wait(timeout)
                except (JavaDriverError, subprocess.TimeoutExpired):
                    pass
        finally:
            self.kill()

    def __enter__(self) -> "JavaDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["JavaDriver", "JavaDriverError", "Reply", "ensure_built", "QUICK", "REPO"]

