"""crosslock and the real Redisson (4.7.0, ``useClusterServers``) on the same Redis Cluster: they
route every lock to the same master, exclude each other, wake each other through the same pub/sub
flavour (sharded SSUBSCRIBE/SPUBLISH under Redisson's default AUTO on Redis 7, plain when both are
told ``off``), and both follow a ``CLUSTER FAILOVER``."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

import crosslock
from java_driver import REPO, JavaDriver
from support import Cluster, Raw, channel, python_env, wait_until

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def subscribers(cluster: Cluster, name: str) -> tuple[int, int]:
    """(sharded subscribers on the master owning the lock's channel, plain ones on every master)."""
    ch = channel(name)
    with cluster.raw_for(ch) as r:
        sharded = r.command("PUBSUB", "SHARDNUMSUB", ch)[1]
    plain = 0
    for port in cluster.masters():
        with Raw(port) as r:
            plain += r.numsub(ch)
    return sharded, plain


@pytest.mark.parametrize("flavour", ["", "?sharded_pubsub=off"], ids=["sharded (AUTO)", "plain (off)"])
def test_a_redisson_unlock_wakes_our_waiter_and_ours_wakes_redisson(cluster, java_built, flavour):
    name = "interop:cluster:wake" + (":plain" if flavour else "")
    # Sharded: the one subscriber sits on the node owning the channel; plain: somewhere.
    listening = (0, 1) if flavour else (1, 0)
    java = JavaDriver.start()
    client = crosslock.connect(cluster.url + flavour, connect_timeout=8)
    try:
        java.connect(cluster.url + flavour)
        java.ok(f"lockLease {name} 60000")
        lock = client.lock(name)
        got: list[bool] = []
        release_now = threading.Event()

        def hold() -> None:
            got.append(lock.acquire(timeout=30))
            release_now.wait(30)
            lock.release()

        holder = threading.Thread(target=hold)
        holder.start()
        wait_until(lambda: subscribers(cluster, name) == listening, 10, what="our waiter to subscribe")
        assert not got
        java.ok(f"unlock {name}")
        wait_until(lambda: got, 10, what="Redisson's unlock to wake our waiter")
        assert got == [True]

        # Now we hold it: Redisson waits (subscribed the same way), and our release wakes it.
        assert java.ok(f"tryLock {name}") == "false"
        wait_until(lambda: subscribers(cluster, name) == (0, 0), 10, what="our subscription to go")
        java.send(f"tryLockWait {name} 30000 60000")
        wait_until(lambda: subscribers(cluster, name) == listening, 10, what="Redisson to subscribe")
        assert not java.has_reply(), "Redisson got a lock we hold"
        release_now.set()
        holder.join(10)
        assert java.expect_ok(java.reply(10)) == "true", "our release did not wake Redisson"
        java.ok(f"unlock {name}")
    finally:
        client.close()
        java.close()


def test_java_python_node_processes_share_one_counter_exactly(cluster, java_built):
    # The counter shares the lock's hash tag, so one master serves both.
    name, key = "{interop:cluster:counter}", "{interop:cluster:counter}:value"
    iterations = 30
    data_url = f"redis://127.0.0.1:{cluster.master_of(key)}/0"
    java = JavaDriver.start()
    others: list[subprocess.Popen] = []
    try:
        java.connect(cluster.url)
        others.append(subprocess.Popen(
            [sys.executable, str(HERE / "counter_worker.py"), cluster.url, name, key, str(iterations), "lock", data_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=python_env(),
        ))
        others.append(subprocess.Popen(
            ["node", str(HERE / "counter_worker.mjs"), cluster.url, name, key, str(iterations), "lock", data_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO),
        ))
        for p in others:
            assert _readline(p, 30) == "READY"
        java.send(f"counter {name} {key} {iterations}")
        for p in others:
            p.stdin.write("go\n")
            p.stdin.close()
        assert java.expect_ok(java.reply(60)) == str(iterations)
        for p in others:
            assert _readline(p, 60) == f"DONE {iterations}"
            assert p.wait(15) == 0
        with cluster.raw_for(key) as r:
            assert r.command("GET", key) == str(3 * iterations), "two holders overlapped"
    finally:
        java.close()
        for p in others:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def test_both_follow_a_cluster_failover(java_built):
    cluster = Cluster()
    java = JavaDriver.start()
    client = crosslock.connect(cluster.url, connect_timeout=8)
    try:
        java.connect(cluster.url)
        name = "interop:cluster:failover"
        java.ok(f"lockLease {name} 60000")
        cluster.sync(name)
        lock = client.lock(name)
        got: list[bool] = []
        fields: list[int] = []

        def wait() -> None:
            got.append(lock.acquire(timeout=40))
            if got[-1]:
                with cluster.raw_for(name) as r:
                    fields.append(len(r.hgetall(name)))
                lock.release()

        waiter = threading.Thread(target=wait)
        waiter.start()
        wait_until(lambda: subscribers(cluster, name) == (1, 0), 10, what="our waiter to subscribe")
        old, new = cluster.failover(name)
        assert not got, "our waiter got the lock Redisson holds"

        # Redisson's unlock reaches the new master (retried while Redisson catches up), and its
        # SPUBLISH there wakes our waiter, whose SSUBSCRIBE followed the slot.
        wait_until(lambda: java.call(f"unlock {name}").ok, 20, interval=0.5,
                   what="Redisson's unlock on the new master")
        waiter.join(15)
        assert got == [True]
        assert fields == [1]
        assert cluster.master_of(name) == new != old
        with Raw(new) as r:
            assert r.command("EXISTS", name) == 0, "the release reached the new master"
    finally:
        client.close()
        java.close()
        cluster.stop()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    box: list = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        proc.kill()
        raise AssertionError(f"{proc.args[:2]} printed nothing within {timeout} s")
    return box[0].strip()
