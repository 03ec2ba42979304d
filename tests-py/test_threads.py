"""After the last client's close() no crosslock thread is left in the process (so Python 3.12+'s
``fork()`` warning about a multi-threaded process stays quiet), and a new connect works.

Each case runs in a fresh interpreter: the pytest process has clients of its own."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import crosslock

# The installed package (the one these tests import), alone on the child's path: a directory
# holding only a link to it, so another interpreter (python_312_or_later) imports the same abi3
# build and nothing else of this venv.
PACKAGE = Path(crosslock.__file__).resolve().parent

# Runs in the child interpreter: prints one JSON object of observations.
SCRIPT = r"""
import json, os, sys, time, warnings
import crosslock

def crosslock_threads():
    names = []
    for comm in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{comm}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # a thread that just ended
    return [n for n in names if n.startswith("crosslock")]

def wait_for_no_thread():
    # A joined thread may be listed for a moment while the kernel reaps it: a 10 s watchdog.
    deadline = time.monotonic() + 10
    while crosslock_threads() and time.monotonic() < deadline:
        time.sleep(0.001)
    return crosslock_threads()

def fork_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]

url = sys.argv[1]
seen = {}
client = crosslock.connect(url)
lock = client.lock("threads:first")
with lock:
    pass
seen["while_open"] = sorted(set(crosslock_threads()))
seen["fork_while_open"] = fork_warnings()
client.close()
seen["after_close"] = wait_for_no_thread()
seen["fork_after_close"] = fork_warnings()

again = crosslock.connect(url)
lock = again.lock("threads:again")
with lock:
    seen["again_locked"] = lock.locked()
seen["again_threads"] = sorted(set(crosslock_threads()))
again.close()
seen["after_second_close"] = wait_for_no_thread()
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def path_of_package(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("package")
    (root / "crosslock").symlink_to(PACKAGE, target_is_directory=True)
    return str(root)


def run(python: str, url: str, path: str) -> dict:
    env = dict(os.environ, PYTHONPATH=path)
    done = subprocess.run([python, "-c", SCRIPT, url], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def python_312_or_later() -> str:
    """An interpreter ≥ 3.12 (which warns on fork() with threads): this one, else one on PATH or
    under pyenv, else ``$CROSSLOCK_TEST_PYTHON312``."""
    if sys.version_info >= (3, 12):
        return sys.executable
    candidates = [os.environ.get("CROSSLOCK_TEST_PYTHON312", "")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    candidates += [shutil.which(f"python3.{minor}") or "" for minor in range(12, 20)]
    for candidate in candidates:
        # A pyenv shim of a version not selected is on PATH but does not run.
        if candidate and os.access(candidate, os.X_OK) and subprocess.run(
            [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"], capture_output=True
        ).returncode == 0:
            return candidate
    pytest.fail("no Python >= 3.12 found: set CROSSLOCK_TEST_PYTHON312 to one's path")


def test_no_crosslock_thread_after_the_last_close_and_a_new_connect_works(url, path_of_package):
    seen = run(sys.executable, url, path_of_package)
    assert "crosslock-rt" in seen["while_open"], seen
    assert seen["after_close"] == [], seen
    assert seen["again_locked"] is True
    assert "crosslock-rt" in seen["again_threads"], seen
    assert seen["after_second_close"] == [], seen


def test_fork_after_close_does_not_warn_on_python_312(url, path_of_package):
    seen = run(python_312_or_later(), url, path_of_package)
    # With a client open the process has crosslock's threads, and Python says so.
    assert any("multi-threaded" in message for message in seen["fork_while_open"]), seen
    assert seen["after_close"] == [], seen
    assert seen["fork_after_close"] == [], seen
