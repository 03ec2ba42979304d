"""crosslock and the real Redisson (4.7.0, ``useSentinelServers``) behind the same Sentinel group:
they find the same master, exclude each other, wake each other (both use plain SUBSCRIBE/PUBLISH
in sentinel mode, as Redisson always does outside Cluster), and both follow a failover."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

import crosslock
from java_driver import REPO, JavaDriver
from support import SentinelGroup, channel, python_env, wait_until

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def group() -> Iterator[SentinelGroup]:
    g = SentinelGroup()
    try:
        yield g
    finally:
        g.stop()


@pytest.fixture
def java(java_built, group) -> Iterator[JavaDriver]:
    driver = JavaDriver.start()
    try:
        driver.connect(group.url)
        yield driver
    finally:
        driver.close()


@pytest.fixture
def client(group) -> Iterator[crosslock.Client]:
    c = crosslock.connect(group.url, connect_timeout=8)
    try:
        yield c
    finally:
        c.close()


def subscribers(group: SentinelGroup, name: str) -> int:
    with group.master().raw() as r:
        return r.numsub(channel(name))


def test_a_redisson_unlock_wakes_our_waiter_and_ours_wakes_redisson(group, java, client):
    name = "interop:sentinel:wake"
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
    # Our waiter listens with a plain SUBSCRIBE on the master, where Redisson publishes.
    wait_until(lambda: subscribers(group, name) > 0, 10, what="our waiter to subscribe")
    assert not got
    java.ok(f"unlock {name}")
    wait_until(lambda: got, 10, what="Redisson's unlock to wake our waiter")
    assert got == [True]

    # Now we hold it: Redisson waits, and our release wakes it.
    assert java.ok(f"tryLock {name}") == "false"
    wait_until(lambda: subscribers(group, name) == 0, 10, what="our subscription to go")
    java.send(f"tryLockWait {name} 30000 60000")
    wait_until(lambda: subscribers(group, name) > 0, 10, what="Redisson to subscribe")
    assert not java.has_reply(), "Redisson got a lock we hold"
    release_now.set()
    holder.join(10)
    assert java.expect_ok(java.reply(10)) == "true", "our release did not wake Redisson"
    java.ok(f"unlock {name}")


def test_java_python_node_processes_share_one_counter_exactly(group, java_built):
    name, key = "interop:sentinel:counter", "interop:sentinel:counter:value"
    iterations = 30
    master_url = group.master().url
    javas = [JavaDriver.start()]
    others: list[subprocess.Popen] = []
    try:
        for j in javas:
            j.connect(group.url)
        others.append(subprocess.Popen(
            [sys.executable, str(HERE / "counter_worker.py"), group.url, name, key, str(iterations), "lock", master_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=python_env(),
        ))
        others.append(subprocess.Popen(
            ["node", str(HERE / "counter_worker.mjs"), group.url, name, key, str(iterations), "lock", master_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO),
        ))
        for p in others:
            assert _readline(p, 30) == "READY"
        for j in javas:
            j.send(f"counter {name} {key} {iterations}")
        for p in others:
            p.stdin.write("go\n")
            p.stdin.close()
        for j in javas:
            assert j.expect_ok(j.reply(60)) == str(iterations)
        for p in others:
            assert _readline(p, 60) == f"DONE {iterations}"
            assert p.wait(15) == 0
        with group.master().raw() as r:
            assert r.command("GET", key) == str(3 * iterations), "two holders overlapped"
    finally:
        for j in javas:
            j.close()
        for p in others:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def test_both_follow_a_failover(java_built):
    group = SentinelGroup()
    java = JavaDriver.start()
    c = crosslock.connect(group.url, connect_timeout=8)
    try:
        java.connect(group.url)
        name = "interop:sentinel:failover"
        java.ok(f"lockLease {name} 60000")
        group.sync()
        lock = c.lock(name)
        got: list[bool] = []
        fields: list[int] = []

        def wait() -> None:
            got.append(lock.acquire(timeout=40))
            if got[-1]:
                # The lock is ours, once, on the new master; released by its owner, this thread.
                with group.node(group.master_port()).raw() as r:
                    fields.append(len(r.hgetall(name)))
                lock.release()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        old_master = group.master_port()
        _, new_master = group.failover()
        assert not got, "our waiter got the lock Redisson holds"
        # Until the sentinels turn the old master into a replica it still takes writes (any
        # client that has not yet heard of the failover can write there, and loses it): wait for
        # that, so every write below lands on the new master.
        group.wait_for_demotion(old_master)

        # Redisson's unlock reaches the new master (retried while Redisson catches up), and its
        # message there wakes our waiter, which by now listens on the new master.
        def unlocked() -> bool:
            reply = java.call(f"unlock {name}")
            return reply.ok
        wait_until(unlocked, 20, interval=0.5, what="Redisson's unlock on the new master")
        waiter.join(15)
        assert got == [True]
        assert group.master_port() == new_master
        assert fields == [1]
        with group.node(new_master).raw() as r:
            assert r.command("EXISTS", name) == 0, "the release reached the new master"
    finally:
        c.close()
        java.close()
        group.stop()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    box: list = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        proc.kill()
        raise AssertionError(f"{proc.args[:2]} printed nothing within {timeout} s")
    return box[0].strip()
