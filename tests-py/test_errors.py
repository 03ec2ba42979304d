"""Every error kind, triggered against a real server: class, builtin base, attributes, message,
Redis left unchanged; every bad input; pickling."""

from __future__ import annotations

import asyncio
import math
import pickle
import socket
import threading
import time

import pytest

import crosslock
from crosslock.errors import RedisError
from support import free_port

# -- one table: how to trigger each kind, and what it must look like ------------------------------


def trigger_not_held(client, raw, fast_client):
    lock = client.lock("nh")
    other = threading.Thread(target=lambda: lock.acquire(lease=60))
    other.start()
    other.join(10)
    before = raw.hgetall("nh")
    try:
        lock.release()
    finally:
        assert raw.hgetall("nh") == before  # nothing changed in Redis
        assert 0 < raw.command("PTTL", "nh") <= 60_000


def trigger_timeout(client, raw, fast_client):
    lock = client.lock("to")
    other = threading.Thread(target=lambda: lock.acquire(lease=60))
    other.start()
    other.join(10)
    with lock.acquired(timeout=0.1):
        pass


def trigger_lock_lost(client, raw, fast_client):
    fired = threading.Event()
    lock = fast_client.lock("ll", on_lost=lambda _: fired.set())
    lock.acquire()
    raw.command("DEL", "ll")
    assert fired.wait(10)
    lock.release()


def trigger_unavailable(client, raw, fast_client):
    crosslock.connect(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=1.0)


def trigger_wrong_type(client, raw, fast_client):
    raw.command("SET", "wt", "not a lock")
    try:
        client.lock("wt").acquire()
    finally:
        assert raw.command("TYPE", "wt") == "string"
        assert raw.command("GET", "wt") == "not a lock"


def trigger_invalid_argument(client, raw, fast_client):
    client.lock("ia").acquire(timeout=-2)


KINDS = [
    # (trigger, class, builtin base, code, lock name in the error, text the message must contain)
    (trigger_not_held, crosslock.NotHeldError, RuntimeError, "NOT_HELD", "nh", "does not hold"),
    (trigger_timeout, crosslock.LockTimeoutError, TimeoutError, "TIMEOUT", "to", "gave up"),
    (trigger_lock_lost, crosslock.LockLostError, crosslock.CrosslockError, "LOCK_LOST", "ll", "lost"),
    (trigger_unavailable, crosslock.RedisUnavailableError, ConnectionError, "UNAVAILABLE", None, "127.0.0.1:"),
    (trigger_wrong_type, crosslock.WrongTypeError, crosslock.CrosslockError, "WRONG_TYPE", "wt", "holds a string, not what a lock stores"),
    (trigger_invalid_argument, crosslock.InvalidArgumentError, ValueError, "INVALID_ARGUMENT", "ia", "≥ 0"),
]


@pytest.mark.parametrize(
    "trigger, cls, builtin, code, lock_name, text", KINDS, ids=[k[3] for k in KINDS]
)
def test_each_error_kind(client, raw, fast_client, trigger, cls, builtin, code, lock_name, text):
    with pytest.raises(cls) as info:
        trigger(client, raw, fast_client)
    err = info.value
    assert type(err) is cls
    assert isinstance(err, crosslock.CrosslockError) and isinstance(err, builtin)
    assert err.code == code
    assert err.lock_name == lock_name
    if lock_name is not None:
        assert f"'{lock_name}'" in str(err)  # the message names the lock
    assert text in str(err)
    if code in ("NOT_HELD", "TIMEOUT", "LOCK_LOST"):
        assert err.holder is not None and err.holder.startswith(
            (client.id if code != "LOCK_LOST" else fast_client.id) + ":"
        )
        if code != "TIMEOUT":  # a timeout names who holds the lock instead
            assert err.holder in str(err)


def test_not_held_names_the_caller_and_the_holder(client, raw):
    lock = client.lock("taken")
    other_holder = {}

    def other():
        assert lock.acquire(lease=60)
        other_holder["h"] = client.holder()

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    with pytest.raises(RuntimeError) as info:  # like threading.Lock.release
        lock.release()
    message = str(info.value)
    assert "taken" in message and client.holder() in message and other_holder["h"] in message
    assert raw.hgetall("taken") == {other_holder["h"]: "1"}


def test_unavailable_names_the_address_and_keeps_the_cause(client):
    port = free_port()
    with pytest.raises(ConnectionError) as info:
        crosslock.connect(f"redis://127.0.0.1:{port}/0", connect_timeout=1.0)
    assert f"127.0.0.1:{port}" in str(info.value)
    assert isinstance(info.value.__cause__, RedisError)


def test_a_server_that_never_answers_fails_within_the_connect_timeout():
    # A listening socket that is never served: TCP connects, Redis never replies.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(crosslock.RedisUnavailableError) as info:
            crosslock.connect(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
        took = time.monotonic() - started
    assert f"127.0.0.1:{port}" in str(info.value)
    assert took < 5, f"connect hung for {took:.1f}s with connect_timeout=0.5"


def test_wrong_type_on_every_operation_leaves_the_key_alone(client, raw):
    raw.command("RPUSH", "a-list", "x")
    lock = client.lock("a-list")
    for op in (lock.acquire, lock.locked, lock.is_held, lock.hold_count, lock.remaining_lease, lock.release):
        with pytest.raises(crosslock.WrongTypeError):
            op()
    with pytest.raises(crosslock.WrongTypeError):
        lock.force_unlock()
    assert raw.command("LRANGE", "a-list", 0, -1) == ["x"]


async def test_async_errors_are_the_same_classes(client, raw):
    raw.command("SET", "async-wt", "v")
    with pytest.raises(crosslock.WrongTypeError) as info:
        await client.lock("async-wt").acquire_async()
    assert info.value.lock_name == "async-wt"
    with pytest.raises(crosslock.NotHeldError):
        await client.lock("async-free").release_async()
    with pytest.raises(crosslock.InvalidArgumentError):
        await client.lock("async-free").acquire_async(timeout=math.nan)


# -- every bad input -------------------------------------------------------------------------


BAD_ACQUIRES = [
    ({"timeout": -2}, ValueError, "timeout"),
    ({"timeout": -0.5}, ValueError, "timeout"),
    ({"timeout": math.nan}, ValueError, "timeout"),
    ({"timeout": math.inf}, ValueError, "timeout"),
    ({"timeout": "1"}, TypeError, "timeout"),
    ({"blocking": 1.5}, TypeError, "did you mean timeout=1.5?"),
    ({"timeout": True}, TypeError, "timeout"),
    ({"blocking": False, "timeout": 1}, ValueError, "non-blocking"),
    ({"lease": 0}, ValueError, "lease"),
    ({"lease": 0.0001}, ValueError, "lease"),
    ({"lease": -1}, ValueError, "lease"),
    ({"lease": math.nan}, ValueError, "lease"),
    ({"lease": "10"}, TypeError, "lease"),
]


@pytest.mark.parametrize("kwargs, builtin, text", BAD_ACQUIRES, ids=[repr(b[0]) for b in BAD_ACQUIRES])
async def test_bad_acquire_arguments(client, raw, kwargs, builtin, text):
    lock = client.lock("args")

    def acquired():
        if "blocking" in kwargs:  # acquired() always blocks; check acquire() again
            return lock.acquire(**kwargs)
        with lock.acquired(**kwargs):
            pass

    def raised(attempt):
        # In a thread: this event loop's thread refuses blocking sync calls (BlockingInEventLoopError).
        try:
            attempt()
        except BaseException as e:
            return e
        return None

    for attempt in (lambda: lock.acquire(**kwargs), acquired):
        error = await asyncio.to_thread(raised, attempt)
        with pytest.raises(crosslock.InvalidArgumentError) as info:
            if error is not None:
                raise error
        assert isinstance(info.value, builtin)
        assert info.value.code == "INVALID_ARGUMENT"
        assert info.value.lock_name == "args"
        assert text in str(info.value) and "args" in str(info.value)
    with pytest.raises(crosslock.InvalidArgumentError):
        await lock.acquire_async(**kwargs)
    assert raw.command("EXISTS", "args") == 0


@pytest.mark.parametrize("name, builtin", [("", ValueError), (None, TypeError), (42, TypeError), (b"x", TypeError)])
def test_bad_lock_names(client, name, builtin):
    with pytest.raises(crosslock.InvalidArgumentError) as info:
        client.lock(name)
    assert isinstance(info.value, builtin)
    assert "lock name" in str(info.value)


def test_on_lost_must_be_callable(client):
    with pytest.raises(TypeError):
        client.lock("x", on_lost="not callable")


@pytest.mark.parametrize(
    "url, options, builtin, text",
    [
        ("http://127.0.0.1:1/", {}, ValueError, "not a Redis URL"),
        ("redis://127.0.0.1:notaport/0", {}, ValueError, "URL"),
        (None, {}, TypeError, "URL"),
        ("redis://127.0.0.1:1/0", {"connect_timeout": -1}, ValueError, "connect_timeout"),
        ("redis://127.0.0.1:1/0", {"connect_timeout": 0}, ValueError, "connect_timeout"),
        ("redis://127.0.0.1:1/0", {"response_timeout": math.nan}, ValueError, "response_timeout"),
        ("redis://127.0.0.1:1/0", {"watchdog_timeout": 0.001}, ValueError, "watchdog_timeout"),
        ("redis://127.0.0.1:1/0", {"watchdog_timeout": "30"}, TypeError, "watchdog_timeout"),
    ],
)
async def test_bad_connect_arguments(url, options, builtin, text):
    with pytest.raises(crosslock.InvalidArgumentError) as info:
        crosslock.connect(url, **options)
    assert isinstance(info.value, builtin) and text in str(info.value)
    with pytest.raises(crosslock.InvalidArgumentError):
        await crosslock.connect_async(url, **options)


def test_password_is_not_in_messages():
    with pytest.raises(crosslock.CrosslockError) as info:
        crosslock.connect("redis://user:s3cret@127.0.0.1:notaport/0")
    assert "s3cret" not in str(info.value)


# -- pickling ------------------------------------------------------------------------------------


ALL_CLASSES = [
    crosslock.CrosslockError,
    crosslock.NotHeldError,
    crosslock.LockTimeoutError,
    crosslock.LockLostError,
    crosslock.RedisUnavailableError,
    crosslock.WrongTypeError,
    crosslock.InvalidArgumentError,
    crosslock.InvalidArgumentTypeError,
]


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_each_class_pickles_with_its_attributes(cls):
    err = cls("lock 'x' broke", lock_name="x", holder="uuid:7", code="SOME_CODE", waited=1.5)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == "lock 'x' broke"
    assert (back.lock_name, back.holder, back.code, back.waited) == ("x", "uuid:7", "SOME_CODE", 1.5)
    plain = pickle.loads(pickle.dumps(cls("m")))
    assert plain.code == cls.code and plain.lock_name is None


def test_a_raised_error_pickles(client):
    with pytest.raises(crosslock.NotHeldError) as info:
        client.lock("p").release()
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is crosslock.NotHeldError
    assert (back.lock_name, back.holder, back.code, str(back)) == (
        "p",
        client.holder(),
        "NOT_HELD",
        str(info.value),
    )

