"""Logging: silent by default; on the standard ``logging`` logger ``crosslock`` when the application
asks, reporting reconnects, renewal failures, lost locks and subscription changes, never a password."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import textwrap

import pytest

import crosslock
from support import Raw, python_env, wait_until

PASSWORD = "s3cret-pw"


def records_matching(caplog: pytest.LogCaptureFixture, level: int, start: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "crosslock" and r.levelno == level and r.getMessage().startswith(start)]


def test_reconnects_lost_locks_and_subscriptions_reach_the_crosslock_logger(redis_server, raw: Raw, caplog):
    raw.command("CONFIG", "SET", "requirepass", PASSWORD)
    url = f"redis://:{PASSWORD}@127.0.0.1:{redis_server.port}/0"
    address = f"127.0.0.1:{redis_server.port}"
    caplog.set_level(logging.DEBUG, logger="crosslock")
    client = crosslock.connect(url, watchdog_timeout=1.5)
    other = crosslock.connect(url)
    try:
        lock = client.lock("log:orders")
        assert lock.acquire()
        # A waiter in another client subscribes to the lock's channel while it is held.
        theirs = other.lock("log:orders")
        waiter = threading.Thread(target=lambda: theirs.acquire(timeout=10) and theirs.release())
        waiter.start()
        wait_until(lambda: records_matching(caplog, logging.DEBUG, "subscribed to redisson_lock__channel:{log:orders}"),
                   what="the subscription to be logged")
        lock.release()
        waiter.join(10)
        wait_until(lambda: records_matching(caplog, logging.DEBUG, "unsubscribed from redisson_lock__channel:{log:orders}"),
                   what="the unsubscription to be logged")

        # The server drops every connection: lost once, back once.
        assert lock.acquire(timeout=5)
        raw.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        raw.command("CLIENT", "KILL", "TYPE", "pubsub")
        wait_until(lambda: records_matching(caplog, logging.WARNING, f"command connection to {address} lost"),
                   what="the lost command connection to be logged")
        wait_until(lambda: records_matching(caplog, logging.WARNING, f"subscription connection to {address} lost"),
                   what="the lost subscription connection to be logged")
        wait_until(lambda: records_matching(caplog, logging.INFO, f"command connection to {address} is back"),
                   what="the reconnect to be logged")

        # Someone deletes the held lock: the watchdog finds it gone and says so.
        raw.command("DEL", "log:orders")
        wait_until(lambda: records_matching(caplog, logging.WARNING, f"lock 'log:orders' lost by {client.holder()}"),
                   what="the lost lock to be logged")
        assert lock.lost
    finally:
        client.close()
        other.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "crosslock"]
    assert not [m for m in messages if PASSWORD in m], messages


def test_nothing_is_printed_unless_the_application_configures_logging(redis_server, raw: Raw):
    # A lost lock and dropped connections, in a process that never configured logging.
    program = textwrap.dedent(f"""
        import socket, time, crosslock
        client = crosslock.connect({redis_server.url!r}, watchdog_timeout=1.5)
        lock = client.lock("log:quiet")
        assert lock.acquire()
        print("HELD", flush=True)
        deadline = time.monotonic() + 10
        while not lock.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.lost, "the lock was not reported lost"
        client.close()
        print("DONE", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=python_env())
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "HELD"
    raw.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    raw.command("DEL", "log:quiet")
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0 and out.strip() == "DONE", out + err
    assert err == "", f"crosslock printed without being asked: {err!r}"
