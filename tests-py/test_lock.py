"""crosslock.Lock from Python threads: layout, reentrancy, exclusion, waits, renewal, loss."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import gc
import threading
import time

import pytest

import crosslock
from support import channel, hold_in_thread, python_env, wait_until

# -- Redisson's layout, seen by a plain client ----------------------------------------------


def test_raw_layout_is_redissons_and_release_publishes_zero(client, raw, redis_server):
    lock = client.lock("orders:42")
    with redis_server.raw() as sub:
        sub.subscribe(channel("orders:42"))
        assert lock.acquire()
        assert raw.hgetall("orders:42") == {client.holder(): "1"}
        assert client.holder() == f"{client.id}:{client.holder().rsplit(':', 1)[1]}"
        assert client.holder().rsplit(":", 1)[1].isdigit()
        assert 29_000 < raw.command("PTTL", "orders:42") <= 30_000
        lock.release()
        assert raw.command("EXISTS", "orders:42") == 0
        assert sub.next_message(timeout=5) == ["message", channel("orders:42"), "0"]


def test_a_lease_is_the_ttl_without_renewal(client, raw):
    lock = client.lock("leased")
    assert lock.acquire(lease=5)
    assert 4_000 < raw.command("PTTL", "leased") <= 5_000
    assert 4.0 < lock.remaining_lease() <= 5.0
    lock.release()
    short = client.lock("short")
    assert short.acquire(lease=0.2)
    wait_until(lambda: not short.locked(), timeout=5, what="a 0.2 s lease to expire")


# -- reentrancy and queries -------------------------------------------------------------------


def test_reentrant_per_thread_and_queries(client, raw):
    lock = client.lock("re")
    assert not lock.locked() and not lock.is_held() and lock.hold_count() == 0
    assert lock.remaining_lease() is None
    assert lock.acquire()
    assert lock.acquire(blocking=False)
    with lock:
        assert lock.hold_count() == 3
        assert raw.hgetall("re") == {client.holder(): "3"}
    assert lock.hold_count() == 2 and lock.is_held() and lock.locked()

    seen = {}

    def other_thread():
        seen["holder"] = client.holder()
        seen["try"] = bool(lock.acquire(blocking=False))
        seen["held"] = lock.is_held()
        seen["count"] = lock.hold_count()
        seen["locked"] = lock.locked()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join(10)
    assert seen == {"holder": seen["holder"], "try": False, "held": False, "count": 0, "locked": True}
    assert seen["holder"] != client.holder()

    lock.release()
    assert lock.locked()
    lock.release()
    assert not lock.locked() and lock.hold_count() == 0
    assert raw.command("EXISTS", "re") == 0


def test_remaining_lease_is_inf_without_expiry(client, raw):
    lock = client.lock("persisted")
    assert lock.acquire(lease=30)
    raw.command("PERSIST", "persisted")
    assert lock.remaining_lease() == math.inf
    lock.release()


def test_force_unlock(client, raw):
    lock = client.lock("forced")
    assert lock.force_unlock() is False
    assert lock.acquire()
    assert lock.force_unlock() is True
    assert raw.command("EXISTS", "forced") == 0
    assert not lock.locked()


def test_same_name_from_two_lock_objects_is_one_lock(client):
    a, b = client.lock("same"), client.lock("same")
    assert a.acquire()
    assert b.is_held() and b.hold_count() == 1  # same thread, same client: same holder
    b.release()
    assert not a.locked()


def test_two_clients_exclude_each_other(client, url):
    with crosslock.connect(url) as other:
        assert client.lock("pair").acquire()
        assert not other.lock("pair").acquire(blocking=False)
        client.lock("pair").release()
        assert other.lock("pair").acquire(blocking=False)
        other.lock("pair").release()


# -- wait limits --------------------------------------------------------------------------------


def test_wait_limits_return_false_like_threading(client):
    lock = client.lock("busy")
    _, release, t = hold_in_thread(lock, lease=60)
    try:
        assert not lock.acquire(blocking=False)
        assert not lock.acquire(timeout=0)
        started = time.monotonic()
        assert not lock.acquire(timeout=0.3)
        assert time.monotonic() - started >= 0.29
        assert not lock.is_held()
    finally:
        release.set()
        t.join(10)
    assert lock.acquire(timeout=5)
    lock.release()


def test_acquired_raises_lock_timeout_error(client):
    lock = client.lock("busy")
    _, release, t = hold_in_thread(lock, lease=60)
    try:
        with pytest.raises(crosslock.LockTimeoutError) as info:
            with lock.acquired(timeout=0.2):
                pytest.fail("must not enter")
        err = info.value
        assert isinstance(err, TimeoutError) and isinstance(err, crosslock.CrosslockError)
        assert err.code == "TIMEOUT" and err.lock_name == "busy"
        assert err.holder == client.holder()
        assert err.waited == pytest.approx(0.2)
        assert "busy" in str(err) and "held by" in str(err)
    finally:
        release.set()
        t.join(10)
    with lock.acquired(timeout=5, lease=10) as same:
        assert same is lock and lock.is_held()
        assert 9 < lock.remaining_lease() <= 10
    assert not lock.locked()


# -- exclusion ----------------------------------------------------------------------------------


def test_eight_threads_exclude_each_other_on_a_non_atomic_counter(client, redis_server, raw):
    lock = client.lock("counter-lock")
    rounds, threads = 25, 8
    errors: list[BaseException] = []

    def worker():
        try:
            with redis_server.raw() as r:
                for _ in range(rounds):
                    with lock:
                        value = int(r.command("GET", "counter") or 0)
                        time.sleep(0.0005)  # widen the race window
                        r.command("SET", "counter", value + 1)
        except BaseException as e:  # reported below
            errors.append(e)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    assert int(raw.command("GET", "counter")) == rounds * threads
    assert not lock.locked()


def test_waiter_is_woken_by_the_release_not_the_lease(client, raw):
    lock = client.lock("handoff")
    assert lock.acquire(lease=60)  # only a release can let the waiter in within the test
    result = {}

    def waiter():
        started = time.monotonic()
        result["acquired"] = bool(lock.acquire())
        result["after"] = time.monotonic() - started
        lock.release()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(channel("handoff")) == 1, what="the waiter to subscribe")
    assert "acquired" not in result
    released_at = time.monotonic()
    lock.release()
    t.join(10)
    assert result.get("acquired") is True
    assert time.monotonic() - released_at < 10  # far below the 60 s lease


def test_blocking_acquire_releases_the_gil(client):
    lock = client.lock("gil")
    _, release, t = hold_in_thread(lock, lease=60)
    ticks = 0
    stop = threading.Event()

    def counter():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    c = threading.Thread(target=counter)
    c.start()
    try:
        time.sleep(0.05)
        before = ticks
        assert not lock.acquire(timeout=0.5)  # blocks this thread for 0.5 s
        progressed = ticks - before
    finally:
        stop.set()
        c.join(10)
        release.set()
        t.join(10)
    assert progressed > 10_000, f"the counting thread only ran {progressed} times"


# -- watchdog, expiry, process death ------------------------------------------------------------


def test_watchdog_keeps_the_lock_past_its_lease(fast_client, raw):
    lock = fast_client.lock("renewed")
    assert lock.acquire()
    assert raw.command("PTTL", "renewed") <= 600
    time.sleep(2.0)  # more than three leases of 0.6 s
    assert lock.locked() and lock.is_held() and not lock.lost
    assert 0 < raw.command("PTTL", "renewed") <= 600
    lock.release()
    assert not lock.locked()


KILLED_HOLDER = textwrap.dedent(
    """
    import sys, time, crosslock
    client = crosslock.connect(sys.argv[1], watchdog_timeout=1.0)
    assert client.lock("doomed").acquire()
    print(client.holder(), flush=True)
    time.sleep(120)
    """
)


def test_kill_9_of_the_holder_frees_the_lock_after_the_lease(client, url, raw):
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_HOLDER, url], stdout=subprocess.PIPE, text=True, env=python_env()
    )
    try:
        holder = child.stdout.readline().strip()
        assert holder, "the child did not acquire"
        assert raw.hgetall("doomed") == {holder: "1"}
        time.sleep(1.5)  # its watchdog has renewed the 1 s lease meanwhile
        assert client.lock("doomed").locked()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        child.stdout.close()
    # Nobody renews it any more: it expires within the 1 s lease, and a waiter gets it.
    lock = client.lock("doomed")
    assert lock.acquire(timeout=10)
    assert raw.hgetall("doomed") == {client.holder(): "1"}
    lock.release()


# -- lost lock ----------------------------------------------------------------------------------


def test_lost_lock_sets_the_flag_calls_back_and_release_raises(fast_client, raw):
    seen: list[tuple[crosslock.Lock, str]] = []
    fired = threading.Event()

    def on_lost(lock):
        seen.append((lock, threading.current_thread().name))
        fired.set()

    lock = fast_client.lock("fragile", on_lost=on_lost)
    assert lock.on_lost is on_lost
    assert lock.acquire()
    assert not lock.lost
    holder = fast_client.holder()
    raw.command("DEL", "fragile")  # behind the holder's back
    assert fired.wait(10), "on_lost was not called"
    assert seen[0][0] is lock
    assert seen[0][1] != threading.current_thread().name  # a background thread
    assert lock.lost
    with pytest.raises(crosslock.LockLostError) as info:
        lock.release()
    assert info.value.lock_name == "fragile" and info.value.holder == holder
    assert info.value.code == "LOCK_LOST" and "fragile" in str(info.value)
    assert lock.lost  # stays true until this thread acquires again
    assert lock.acquire()
    assert not lock.lost
    lock.release()


def test_lost_lock_raises_on_leaving_with(fast_client):
    fired = threading.Event()
    lock = fast_client.lock("forced-away", on_lost=lambda _: fired.set())
    with pytest.raises(crosslock.LockLostError):
        with lock:
            assert lock.force_unlock()
            assert fired.wait(10)
            assert lock.lost


def test_lost_flag_is_per_holder(fast_client, raw):
    fired = threading.Event()
    lock = fast_client.lock("per-holder", on_lost=lambda _: fired.set())
    seen = {}

    def holder_thread():
        assert lock.acquire()
        raw_deleted.wait(10)
        assert fired.wait(10)
        seen["lost_in_holder"] = lock.lost
        try:
            lock.release()
        except crosslock.LockLostError:
            seen["release"] = "LockLostError"

    raw_deleted = threading.Event()
    t = threading.Thread(target=holder_thread)
    t.start()
    wait_until(lambda: lock.locked(), what="the holder thread to acquire")
    raw.command("DEL", "per-holder")
    raw_deleted.set()
    t.join(15)
    assert seen == {"lost_in_holder": True, "release": "LockLostError"}
    assert not lock.lost  # this thread never held it


def test_every_object_of_the_name_hears_a_loss_and_dropped_objects_are_forgotten(fast_client, raw):
    heard: list[str] = []
    first = fast_client.lock("shared-route", on_lost=lambda _: heard.append("first"))
    second = fast_client.lock("shared-route", on_lost=lambda _: heard.append("second"))
    # Objects made per request and dropped (the usual web handler), of this name and of others.
    for i in range(1000):
        fast_client.lock("shared-route")
        fast_client.lock(f"per-request:{i}")
    gc.collect()
    fast_client.lock("one-more")  # registering past the table's size purges the dead entries
    routes = fast_client._locks
    assert len(routes) < 100, "names whose lock objects are gone stay in the lost-event table"
    assert len(routes._table["shared-route"]) <= 16, "dead objects of a live name pile up"

    assert first.acquire()
    raw.command("DEL", "shared-route")
    wait_until(lambda: len(heard) == 2, what="both objects' on_lost")
    assert sorted(heard) == ["first", "second"]
    assert first.lost and second.lost  # the same holder (this thread) through either object
    with pytest.raises(crosslock.LockLostError):
        second.release()
    assert first.acquire()
    assert not first.lost and not second.lost  # acquiring again clears it, for every object
    first.release()


def test_on_lost_exceptions_go_to_unraisablehook(fast_client, raw):
    reported = threading.Event()
    caught = []

    def hook(args):
        caught.append(args.exc_value)
        reported.set()

    def on_lost(_lock):
        raise RuntimeError("boom in on_lost")

    old, sys.unraisablehook = sys.unraisablehook, hook
    try:
        lock = fast_client.lock("noisy", on_lost=on_lost)
        assert lock.acquire()
        raw.command("DEL", "noisy")
        assert reported.wait(10)
        assert "boom in on_lost" in str(caught[0])
    finally:
        sys.unraisablehook = old
    with pytest.raises(crosslock.LockLostError):
        lock.release()


# -- client lifecycle ---------------------------------------------------------------------------


def test_reprs_and_exports(client):
    lock = client.lock("named")
    assert lock.name == "named" and lock.client is client
    assert repr(lock) == f"<crosslock.Lock 'named' client={client.id!r}>"
    for name in crosslock.__all__:
        assert hasattr(crosslock, name), name
    assert crosslock.__version__
    assert os.path.exists(os.path.join(os.path.dirname(crosslock.__file__), "py.typed"))
