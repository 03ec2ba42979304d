"""os.fork(): the child uses its client at once, with a new client id and fresh connections, and
never renews or releases the parent's locks."""

from __future__ import annotations

import json
import os
import select
import threading
import time

import pytest

import crosslock
from support import Raw, channel, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def run_in_child(body) -> dict:
    """Forks; the child runs ``body()`` (a dict of observations) and exits; returns that dict."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 1
        try:
            os.close(read_end)
            try:
                result = body()
                status = 0
            except BaseException as e:  # reported to the parent
                result = {"error": repr(e)}
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    result = json.loads(b"".join(chunks) or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0, result
    return result


def test_child_has_its_own_id_and_never_touches_the_parents_lock(url, raw, redis_server):
    client = crosslock.connect(url, watchdog_timeout=0.6)
    try:
        lock = client.lock("forked")
        assert lock.acquire()
        parent_id, parent_holder = client.id, client.holder()

        def child():
            seen = {"id": client.id, "holder": client.holder()}
            seen["watched"] = client._native.watched_locks()
            seen["locked"] = lock.locked()
            seen["is_held"] = lock.is_held()
            try:
                lock.release()
                seen["release"] = "released!"
            except crosslock.NotHeldError as e:
                seen["release"] = "NotHeldError"
                seen["release_message"] = str(e)
            seen["try"] = bool(lock.acquire(blocking=False))
            own = client.lock("child-own")
            seen["own"] = bool(own.acquire(timeout=5))
            with Raw(redis_server.port) as r:  # a connection of the child's own
                seen["own_field"] = list(r.hgetall("child-own"))
            seen["watched_own"] = client._native.watched_locks()
            own.release()
            client.close()  # releases what the child holds, and only that
            return seen

        seen = run_in_child(child)
        assert "error" not in seen, seen
        assert seen["id"] != parent_id
        assert seen["holder"].startswith(seen["id"] + ":")
        assert seen["watched"] == 0  # the child renews nothing of the parent's
        assert seen["locked"] is True and seen["is_held"] is False
        assert seen["release"] == "NotHeldError" and parent_holder in seen["release_message"]
        assert seen["try"] is False
        assert seen["own"] is True and seen["own_field"] == [seen["holder"]]
        assert seen["watched_own"] == 1

        # The parent still holds its lock, still renewed by its own watchdog.
        assert client.id == parent_id
        assert raw.hgetall("forked") == {parent_holder: "1"}
        time.sleep(1.0)  # > one 0.6 s lease: alive only if the parent's watchdog still renews
        assert lock.is_held() and raw.hgetall("forked") == {parent_holder: "1"}
        assert 0 < raw.command("PTTL", "forked") <= 600
        lock.release()
        assert not lock.locked()
    finally:
        client.close()


def test_child_waits_and_is_woken_on_fresh_connections(url, raw, redis_server):
    client = crosslock.connect(url)
    try:
        lock = client.lock("forked-wait")
        assert lock.acquire(lease=60)  # held by the parent while the child waits

        def child():
            # The parent's hold is deleted (and the release published, as Redisson does) by a
            # plain client as soon as the child waits: only the child's fresh subscription
            # connection can wake it.
            def release_parents_hold():
                with Raw(redis_server.port) as r:
                    wait_until(lambda: r.numsub(channel("forked-wait")) == 1)
                    r.command("DEL", "forked-wait")
                    r.command("PUBLISH", channel("forked-wait"), "0")

            t = threading.Thread(target=release_parents_hold)
            t.start()
            acquired = bool(lock.acquire(timeout=10))
            t.join(10)
            with Raw(redis_server.port) as r:
                holders = list(r.hgetall("forked-wait"))
            lock.release()
            return {"acquired": acquired, "holders": holders, "holder": client.holder()}

        seen = run_in_child(child)
        assert seen.get("acquired") is True, seen
        assert seen["holders"] == [seen["holder"]]
    finally:
        client.close()

