"""The inspector end to end: ``client.inspect`` / ``client.scan`` / ``client.watch`` and the
``crosslock`` command (``python -m crosslock``) against a real server holding locks taken by Python, Node and Java's
Redisson."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence

import pytest

import crosslock
from support import Raw, python_env, wait_until

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "interop"))
sys.path.insert(0, str(HERE / "cross"))
from java_driver import JavaDriver, ensure_built  # noqa: E402
from test_cross_language import Worker  # noqa: E402


def cli(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crosslock", "--url", url, *args],
        input=stdin, capture_output=True, text=True, env=python_env(), timeout=60,
    )


@pytest.fixture
def java(url):
    ensure_built()
    driver = JavaDriver.start()
    try:
        driver.connect(url)
        yield driver
    finally:
        driver.close()


def test_inspect_list_and_force_unlock_see_python_node_and_java_holders(url, client, raw: Raw, java: JavaDriver, request):
    # Python holds a lock twice; Java holds a fair lock with one of our threads queued behind it;
    # a Node process reads a read-write lock; a semaphore has permits.
    lock = client.lock("insp:orders")
    assert lock.acquire() and lock.acquire()
    assert java.ok("kind fair") == "fair"
    java.ok("lock insp:printer")
    java_holder = java.holder()
    fair = client.fair_lock("insp:printer")
    waiter = threading.Thread(target=lambda: fair.acquire(timeout=30) and fair.release(), daemon=True)
    waiter.start()
    wait_until(lambda: raw.command("LLEN", "redisson_lock_queue:{insp:printer}") == 1, what="our waiter to queue")
    node = Worker("node", url, "hold", "insp:catalog", env={"CROSSLOCK_KIND": "read_lock"})
    request.addfinalizer(node.kill)
    node_id = node.expect("READY")
    node.expect("HELD")
    assert client.semaphore("insp:slots").try_set_permits(3)

    seen = client.inspect("insp:orders")
    me = {"language": "py", "pid": os.getpid(), "host": "127.0.0.1", "name": f"crosslock-py-{os.getpid()}-{client.id.replace('-', '')[:8]}"}
    assert seen["kind"] == "lock" and seen["holders"] == [
        {"holder": client.holder(), "client_id": client.id, "holds": 2, "write": False, "read_leases": [],
         "process": {**me, "address": seen["holders"][0]["process"]["address"]}}
    ]
    assert seen["holders"][0]["process"]["address"].startswith("127.0.0.1:")
    assert 20 < seen["ttl"] <= 30
    seen = client.inspect("insp:printer")
    assert seen["kind"] == "fair_lock"
    assert [h["holder"] for h in seen["holders"]] == [java_holder]
    assert seen["holders"][0]["process"] is None, "a Redisson holder is shown as it is"
    assert len(seen["queue"]) == 1 and seen["queue"][0]["deadline"] is not None
    assert seen["queue"][0]["process"]["name"] == me["name"]
    seen = client.inspect("insp:catalog")
    assert seen["kind"] == "read_write_lock" and seen["mode"] == "read"
    assert seen["holders"][0]["client_id"] == node_id and len(seen["holders"][0]["read_leases"]) == 1
    node_process = seen["holders"][0]["process"]
    assert node_process["language"] == "js" and node_process["name"].endswith(node_id.replace("-", "")[:8])
    assert client.inspect("insp:slots")["count"] == 3
    assert client.inspect("insp:nothing")["kind"] == "absent"
    assert client.scan("insp:*") == ["insp:catalog", "insp:orders", "insp:printer", "insp:slots"]
    with pytest.raises(crosslock.InvalidArgumentError):
        client.scan("")

    # The command line says the same.
    out = cli(url, "inspect", "insp:printer")
    assert out.returncode == 0, out.stderr
    assert "fair lock" in out.stdout and java_holder in out.stdout and "waiting #1" in out.stdout
    out = cli(url, "inspect", "insp:orders", "--json")
    assert json.loads(out.stdout)["holders"][0]["holds"] == 2
    assert cli(url, "inspect", "insp:nothing").returncode == 1
    # A holder whose lease is below two thirds of the watchdog timeout was not renewed lately.
    assert "not renewed" not in cli(url, "inspect", "insp:orders").stdout
    assert "not renewed within the last 100 s" in cli(url, "--watchdog-timeout", "300", "inspect", "insp:orders").stdout
    out = cli(url, "inspect", "insp:orders")
    assert f"Python pid {os.getpid()} on 127.0.0.1" in out.stdout and me["name"] in out.stdout, out.stdout
    assert f"Node.js pid {node_process['pid']}" in cli(url, "inspect", "insp:catalog").stdout
    # The Python CLI takes the Node CLI's grammar: options after the command and its NAME.
    out = subprocess.run([sys.executable, "-m", "crosslock", "inspect", "insp:orders", "--url", url, "--json"],
                         capture_output=True, text=True, env=python_env(), timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["holders"][0]["holds"] == 2, out.stderr
    # A list shows only what is recognisably ours (an idle semaphore is a number like any app's
    # key); --all shows everything.
    raw.command("SET", "insp:app-counter", "7")
    raw.command("HSET", "insp:app-hash", "field", "x")
    out = cli(url, "list", "insp:*")
    assert [line.split("\t")[:2] for line in out.stdout.splitlines()] == [
        ["insp:catalog", "read_write_lock"], ["insp:orders", "lock"], ["insp:printer", "fair_lock"],
    ]
    out = cli(url, "list", "insp:*", "--all")
    assert [line.split("\t")[:2] for line in out.stdout.splitlines()] == [
        ["insp:app-counter", "counter"], ["insp:app-hash", "hash"], ["insp:catalog", "read_write_lock"],
        ["insp:orders", "lock"], ["insp:printer", "fair_lock"], ["insp:slots", "counter"],
    ]
    raw.command("DEL", "insp:app-counter", "insp:app-hash")

    # force-unlock asks first; "n" leaves the lock alone, --yes deletes it and the queue moves on.
    out = cli(url, "force-unlock", "insp:printer", stdin="n\n")
    assert out.returncode == 1 and "left as it was" in out.stdout
    assert raw.hgetall("insp:printer") == {java_holder: "1"}
    out = cli(url, "force-unlock", "insp:printer", "--yes")
    assert out.returncode == 0 and java_holder in out.stdout, out.stdout + out.stderr
    waiter.join(10)
    assert not waiter.is_alive(), "our queued waiter was not let in after the force-unlock"
    assert cli(url, "force-unlock", "insp:slots", "--yes").returncode == 1  # not a lock: refused
    assert raw.command("GET", "insp:slots") == "3"

    node.send_line()
    node.expect("RELEASED")
    node.finish()
    lock.release()
    lock.release()


def test_the_command_says_when_the_server_cannot_be_reached():
    out = cli("redis://127.0.0.1:1/0", "list")
    assert out.returncode == 2 and "127.0.0.1:1" in out.stderr


class WatchProcess:
    """``python -m crosslock watch NAME --json`` in a child process, its lines read as they come."""

    def __init__(self, url: str, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crosslock", "--url", url, "watch", name, "--json", "--interval", "0.05"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=python_env(),
            # Ctrl-C reaches it as in a terminal, even when this suite runs where SIGINT is ignored
            # (a background job), which Python would otherwise inherit.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self, expecting: str) -> dict:
        try:
            return json.loads(self.lines.get(timeout=10))
        except queue.Empty:
            raise AssertionError(f"crosslock watch printed nothing within 10 s; expected {expecting}") from None

    def expect(self, event: str, holder: Optional[str] = None, skip: Sequence[str] = ()) -> dict:
        """The next event, skipping those named in ``skip``; it must be ``event`` (by ``holder``)."""
        while True:
            e = self.next(event)
            if e["event"] in skip:
                continue
            assert e["event"] == event, f"expected {event}, got {e}"
            if holder is not None:
                assert e["holder"] == holder, e
            return e

    def stop(self) -> subprocess.CompletedProcess:
        """Ctrl-C, as an operator would; the command ends cleanly."""
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=10)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "", err)


def test_watch_follows_python_node_and_java_holders_until_ctrl_c(url, client, java: JavaDriver, request):
    watch = WatchProcess(url, "w:orders")
    request.addfinalizer(lambda: watch.proc.poll() is None and watch.proc.kill())
    start = watch.next("the starting state")
    assert start["event"] == "start" and start["state"]["kind"] == "absent"

    # Python: an acquire, a re-entry, two releases.
    lock = client.lock("w:orders")
    assert lock.acquire()
    e = watch.expect("acquired", client.holder())
    assert e["state"]["holders"][0]["holds"] == 1 and "lease" in e["detail"]
    assert "acquired" in e["text"] and "w:orders" in e["text"]
    assert lock.acquire()
    watch.expect("reentered", client.holder())
    lock.release()
    watch.expect("exited", client.holder())
    lock.release()
    watch.expect("released", client.holder())

    # Node: a holder in another process.
    node = Worker("node", url, "hold", "w:orders")
    request.addfinalizer(node.kill)
    node_id = node.expect("READY")
    node.expect("HELD")
    e = watch.expect("acquired")
    assert e["holder"].startswith(node_id + ":")
    node.send_line()
    node.expect("RELEASED")
    node.finish()
    watch.expect("released", e["holder"])

    # Java's Redisson: held twice, then force-unlocked from the command line.
    java_holder = java.holder()
    java.ok("lock w:orders")
    watch.expect("acquired", java_holder)
    java.ok("lock w:orders")
    watch.expect("reentered", java_holder)
    out = cli(url, "force-unlock", "w:orders", "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    watch.expect("force-unlocked", java_holder)

    # A short explicit lease that runs out: expired.
    assert lock.acquire(lease=1.0)  # long enough that a snapshot sees it held on a loaded machine
    watch.expect("acquired", client.holder())
    watch.expect("expired", client.holder())

    done = watch.stop()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_watch_from_the_library_sync_and_asyncio(url, client):
    sem = client.semaphore("w:pool")
    with client.watch("w:pool", interval=0.05) as watch:
        assert watch.initial["kind"] == "absent"
        assert sem.try_set_permits(2)
        e = next(watch)
        assert (e["event"], e["detail"], e["state"]["count"]) == ("count", "none → 2", 2)
        sem.acquire()
        assert next(watch)["detail"] == "2 → 1"
    assert watch.next() is None, "a closed watch answers None"
    assert list(watch) == []
    # close() from another thread ends a loop waiting for a change.
    idle = client.watch("w:idle", interval=0.05)
    threading.Timer(0.1, idle.close).start()
    assert list(idle) == []
    with pytest.raises(crosslock.InvalidArgumentError):
        client.watch("w:pool", interval=0)

    async def follow() -> list:
        aclient = await crosslock.connect_async(url)
        try:
            watch = await aclient.watch_async("w:pool", interval=0.05)
            async with watch:
                await asyncio.get_running_loop().run_in_executor(None, sem.release)
                seen = []
                async for e in watch:
                    seen.append(e["detail"])
                    break
                return seen
        finally:
            await aclient.aclose()

    assert asyncio.run(asyncio.wait_for(follow(), 10)) == ["1 → 2"]


def test_help_is_plain_text_and_options_go_anywhere():
    out = subprocess.run([sys.executable, "-m", "crosslock", "--help"], capture_output=True, text=True,
                         env=python_env(), timeout=60)
    assert out.returncode == 0
    assert "``" not in out.stdout and ":class:" not in out.stdout, out.stdout
    assert "crosslock inspect orders:42 --url" in out.stdout


def test_connection_names_and_a_bad_client_name(url, raw: Raw):
    with crosslock.connect(url, client_name="orders-api") as named:
        name = f"orders-api-py-{os.getpid()}-{named.id.replace('-', '')[:8]}"
        with named.lock("insp:named"):
            wait_until(lambda: name in raw.command("CLIENT", "LIST"), what="the connection named")
            with crosslock.connect(url) as other:
                assert other.inspect("insp:named")["holders"][0]["process"]["name"] == name
    for bad in ("two words", "", "x" * 65):
        with pytest.raises(crosslock.InvalidArgumentError, match="client_name"):
            crosslock.connect(url, client_name=bad)
    with pytest.raises(crosslock.InvalidArgumentTypeError):
        crosslock.connect(url, client_name=7)  # type: ignore[arg-type]


@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
def test_the_holders_process_is_named_behind_sentinel_and_on_a_cluster(topology):
    from support import Cluster, SentinelGroup

    deployment = SentinelGroup() if topology == "sentinel" else Cluster()
    try:
        with crosslock.connect(deployment.url, connect_timeout=8.0) as holder, \
                crosslock.connect(deployment.url, connect_timeout=8.0) as other:
            for name in ["insp:a", "insp:b", "insp:c", "insp:d"]:
                with holder.lock(name):
                    process = other.inspect(name)["holders"][0]["process"]
                    assert process is not None and process["pid"] == os.getpid() and process["language"] == "py"
                    assert process["name"].endswith(holder.id.replace("-", "")[:8])
    finally:
        deployment.stop()
