"""The inspector end to end: ``client.inspect`` / ``client.scan`` and the ``crosslock`` command
(``python -m crosslock``) against a real server holding locks taken by Python, Node and Java's
Redisson."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

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
    assert seen["kind"] == "lock" and seen["holders"] == [
        {"holder": client.holder(), "client_id": client.id, "holds": 2, "write": False, "read_leases": []}
    ]
    assert 20 < seen["ttl"] <= 30
    seen = client.inspect("insp:printer")
    assert seen["kind"] == "fair_lock"
    assert [h["holder"] for h in seen["holders"]] == [java_holder]
    assert len(seen["queue"]) == 1 and seen["queue"][0]["deadline"] is not None
    seen = client.inspect("insp:catalog")
    assert seen["kind"] == "read_write_lock" and seen["mode"] == "read"
    assert seen["holders"][0]["client_id"] == node_id and len(seen["holders"][0]["read_leases"]) == 1
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
    out = cli(url, "list", "insp:*")
    assert [line.split("\t")[:2] for line in out.stdout.splitlines()] == [
        ["insp:catalog", "read_write_lock"], ["insp:orders", "lock"], ["insp:printer", "fair_lock"], ["insp:slots", "counter"],
    ]

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
