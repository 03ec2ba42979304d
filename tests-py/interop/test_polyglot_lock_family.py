"""The lock family across languages on one redis-server: Python and Node processes (each a real
process with its own client, driven by ``hold_worker.py`` / ``hold_worker.mjs``) and Java's Redisson
(the driver in its own JVM) take the same locks.

- FairLock: 6 processes (3 Python, 3 Node) queue in a known order and are served in exactly that
  order, even when one of them is killed with -9 while it waits (the rest go on once its deadline
  passes).
- ReadWriteLock: a Python, a Java and a Node reader hold together; the Java reader releasing first
  leaves the others' holds intact; a writer gets in only after the last reader.
- FencedLock: tokens taken in turn by Python, Node and Java on one name strictly increase.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import pytest

from java_driver import REPO, JavaDriver
from support import Raw, python_env, wait_until

HERE = Path(__file__).resolve().parent
REPLY_WITHIN = 20.0  # seconds; a reply that does not come by then is a failure, not a hang
FAIR_WAIT_MS = 2000  # the fair wait of the fair-lock workers: a killed waiter is skipped ~2 s on


class Worker:
    """A ``hold_worker`` process in Python or Node; its stdout lines arrive on a queue."""

    def __init__(self, lang: str, url: str, *extra: str) -> None:
        self.lang = lang
        if lang == "python":
            cmd = [sys.executable, str(HERE / "hold_worker.py"), url, *extra]
        else:
            cmd = ["node", str(HERE / "hold_worker.mjs"), url, *extra]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=python_env(), cwd=str(REPO),
        )
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.line() == "READY"

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = REPLY_WITHIN) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the {self.lang} worker said nothing within {timeout} s") from None
        if line is None:
            raise AssertionError(f"the {self.lang} worker exited: {self.proc.wait(10)} {self.proc.stderr.read()}")
        return line

    def said_nothing(self) -> bool:
        return self.lines.empty()

    def acquire(self, kind: str, name: str) -> None:
        self.send(f"acquire {kind} {name}")

    def acquired(self) -> str:
        words = self.line().split()
        assert words[0] == "ACQUIRED", words
        return words[1]

    def release(self) -> None:
        self.send("release")
        assert self.line() == "RELEASED"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def workers(redis_url):
    made: list[Worker] = []

    def start(lang: str, *extra: str) -> Worker:
        w = Worker(lang, redis_url, *extra)
        made.append(w)
        return w

    yield start
    for w in made:
        w.close()


def test_fair_lock_serves_python_and_node_processes_in_order_past_a_killed_waiter(
    client, raw: Raw, workers
):
    name = "polyglot:fair"
    langs = ["python", "node", "python", "node", "python", "node"]
    procs = [workers(lang, str(FAIR_WAIT_MS)) for lang in langs]
    held = client.fair_lock(name)
    assert held.acquire(lease=60)
    for i, w in enumerate(procs):  # each joins only once the one before is in the queue
        w.acquire("fair", name)
        wait_until(
            lambda: raw.command("LLEN", f"redisson_lock_queue:{{{name}}}") == i + 1,
            what=f"waiter {i} ({w.lang}) to queue",
        )
    killed = procs[2]
    killed.proc.kill()  # kill -9 while queued: its queue entry stays until its deadline
    killed.proc.wait(10)
    assert raw.command("LLEN", f"redisson_lock_queue:{{{name}}}") == 6
    held.release()
    for i, w in enumerate(procs):
        if w is killed:
            continue
        w.acquired()
        assert all(o.said_nothing() for o in procs if o is not w and o is not killed), (
            f"another waiter acquired while waiter {i} ({w.lang}) held the fair lock"
        )
        w.release()
    assert raw.command("EXISTS", name, f"redisson_lock_queue:{{{name}}}", f"redisson_lock_timeout:{{{name}}}") == 0


def test_read_lock_held_by_python_java_and_node_survives_the_java_reader_releasing_first(
    java: JavaDriver, client, raw: Raw, workers
):
    name = "polyglot:rw"
    py, node = workers("python"), workers("node")
    py.acquire("read", name)
    py.acquired()
    assert java.ok("kind read") == "read"
    java.ok(f"lock {name}")
    node.acquire("read", name)
    node.acquired()
    readers = {k for k in raw.hgetall(name) if k != "mode"}
    assert len(readers) == 3 and raw.hgetall(name).get("mode") == "read"

    writer = client.read_write_lock(name).write_lock()
    assert writer.acquire(blocking=False) is False
    java.ok(f"unlock {name}")  # the Java reader leaves first
    left = {k for k in raw.hgetall(name) if k != "mode"}
    assert len(left) == 2 and left < readers, "the Java release touched the other readers"
    assert raw.hgetall(name).get("mode") == "read" and raw.command("PTTL", name) > 0
    for reader in left:
        assert raw.command("EXISTS", f"{{{name}}}:{reader}:rwlock_timeout:1") == 1, reader
    assert writer.acquire(blocking=False) is False
    py.release()
    assert writer.acquire(blocking=False) is False
    node.release()
    assert writer.acquire(timeout=REPLY_WITHIN) is True  # the last reader's release lets it in
    writer.release()
    assert raw.command("EXISTS", name) == 0


def test_fenced_tokens_from_python_node_and_java_strictly_increase(java: JavaDriver, raw: Raw, workers):
    name = "polyglot:fenced"
    py, node = workers("python"), workers("node")
    assert java.ok("kind fenced") == "fenced"
    tokens: list[int] = []
    for _ in range(3):
        for w in (py, node):
            w.acquire("fenced", name)
            tokens.append(int(w.acquired()))
            w.release()
        tokens.append(int(java.ok(f"token {name}")))
        java.ok(f"unlock {name}")
    assert tokens == sorted(set(tokens)), f"tokens not strictly increasing: {tokens}"
    assert int(raw.command("GET", f"redisson_lock_token:{{{name}}}")) == tokens[-1]
