"""Python and Node processes contending on the same locks (issue 2, "Cross-language").

Each case starts real processes: `py_worker.py` and `node_worker.mjs` beside this file. A waiter
must be *woken* by the other language's release: the holder keeps the lock with the watchdog (a
30 s lease, renewed), so only the release message can hand it over within the bounds asserted.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import Raw, RedisServer, channel, python_env, wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The JavaScript runtime the "node" workers run on: `node` unless the test setting names another
# command (`./dev test` runs a case with `node_modules/.bin/bun` and with `node_modules/.bin/deno
# run -A`).
JS_RUNTIME = shlex.split(os.environ.get("CROSSLOCK_TEST_JS_RUNTIME", "node"))


class Worker:
    """A child process speaking the workers' line protocol; `env` adds to its environment
    (``CROSSLOCK_KIND``, ``CROSSLOCK_FAIR_WAIT``)."""

    def __init__(self, lang: str, *args: str, env: dict[str, str] | None = None) -> None:
        if lang == "python":
            cmd = [sys.executable, str(HERE / "py_worker.py"), *args]
        else:
            cmd = [*JS_RUNTIME, str(HERE / "node_worker.mjs"), *args]
        self.lang = lang
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**python_env(), **(env or {})}, cwd=ROOT,
        )
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line.strip())
                self._cv.notify_all()
        with self._cv:
            self.lines.append("<EOF>")
            self._cv.notify_all()

    def expect(self, word: str, timeout: float = 30.0) -> str:
        """Waits for a line starting with `word` and returns the rest of it."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for line in self.lines:
                    if line.startswith(word):
                        return line[len(word):].strip()
                    if line == "<EOF>":
                        err = self.proc.stderr.read() if self.proc.stderr else ""
                        raise AssertionError(f"{self.lang} worker exited before {word!r}: {self.lines} {err}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.lang} worker did not print {word!r} in {timeout}s: {self.lines}")
                self._cv.wait(left)

    def send_line(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 30.0) -> None:
        assert self.proc.wait(timeout) == 0, f"{self.lang} worker failed: {self.lines}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def workers():
    started: list[Worker] = []

    def start(lang: str, *args: str, env: dict[str, str] | None = None) -> Worker:
        w = Worker(lang, *args, env=env)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


@pytest.mark.parametrize(("holder_lang", "waiter_lang"), [("python", "node"), ("node", "python")])
def test_waiter_in_one_language_is_woken_by_release_in_the_other(
    redis_server: RedisServer, raw: Raw, workers, holder_lang: str, waiter_lang: str
) -> None:
    name = f"cross:{holder_lang}-to-{waiter_lang}"
    holder = workers(holder_lang, redis_server.url, "hold", name)
    holder_id = holder.expect("READY")
    holder.expect("HELD")
    fields = raw.hgetall(name)
    assert len(fields) == 1 and next(iter(fields)).startswith(holder_id + ":")

    waiter = workers(waiter_lang, redis_server.url, "wait", name)
    waiter.expect("READY")
    # The waiter has tried once and subscribed: it is now waiting for the release message.
    wait_until(lambda: raw.numsub(channel(name)) >= 1, what="the waiter to subscribe")
    assert raw.hgetall(name) == fields, "the waiter must not touch the held lock"

    holder.send_line()
    released_ns = int(holder.expect("RELEASED"))
    acquired_ns = int(waiter.expect("ACQUIRED"))
    holder.finish()
    waiter.finish()
    # Woken by the release message: the holder's lease was 30 s (watchdog), the waiter's limit 30 s.
    gap_s = (acquired_ns - released_ns) / 1e9
    assert 0 <= gap_s < 5, f"the {waiter_lang} waiter took {gap_s:.3f}s after the {holder_lang} release"
    assert raw.command("EXISTS", name) == 0


def test_four_python_and_four_node_processes_keep_a_counter_exact(
    redis_server: RedisServer, raw: Raw, workers
) -> None:
    per_process = 60
    procs = [
        workers(lang, redis_server.url, "counter", "cross:counter", "cross:value", str(per_process))
        for lang in ["python", "node"] * 4
    ]
    for p in procs:
        p.expect("DONE", timeout=120)
        p.finish()
    assert int(raw.command("GET", "cross:value")) == 8 * per_process
    assert raw.command("EXISTS", "cross:counter") == 0
