"""G5: bad input never reaches Redis; G6: errors say what happened; G7: name collisions change
nothing."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

import crosslock
from harness import FACTORY, KIND_IDS, Server, wait_until

TOO_LONG = 1e16  # seconds: past Redis's PEXPIRE range
WRAPS = 2**64 / 1000 + 5  # seconds: just over 2^64 ms, which would wrap
BAD_LEASES = [TOO_LONG, WRAPS, 0, -1, math.nan, math.inf]
BAD_WAITS = [1e19, 10**400, math.nan]


def bad_calls(client: crosslock.Client) -> list[tuple[str, Callable[[], Any]]]:
    calls: list[tuple[str, Callable[[], Any]]] = []
    for kind in KIND_IDS:
        lock = FACTORY[kind](client, f"g5:{kind}")
        for lease in BAD_LEASES:
            calls.append((f"{kind}.acquire(lease={lease!r})", lambda l=lock, x=lease: l.acquire(lease=x)))
        for wait in BAD_WAITS:
            calls.append((f"{kind}.acquire(timeout={str(wait)[:8]})", lambda l=lock, x=wait: l.acquire(timeout=x)))
        calls.append((f"{kind} with a lone surrogate", lambda k=kind: FACTORY[k](client, "g5:\ud800")))
    sem = client.semaphore("g5:semaphore")
    calls += [
        ("semaphore.acquire(permits=-1)", lambda: sem.acquire(permits=-1)),
        ("semaphore.acquire(timeout=1e19)", lambda: sem.acquire(timeout=1e19)),
        ("semaphore.release(permits=0)", lambda: sem.release(permits=0)),
        ("semaphore.release(permits=2**70)", lambda: sem.release(permits=2**70)),
        ("semaphore.try_set_permits(-1)", lambda: sem.try_set_permits(-1)),
        ("semaphore.add_permits(2**70)", lambda: sem.add_permits(2**70)),
        ("semaphore.add_permits(-2**40)", lambda: sem.add_permits(-(2**40))),
        ("a semaphore with a lone surrogate", lambda: client.semaphore("g5:\udfff")),
    ]
    pes = client.permit_expirable_semaphore("g5:permits")
    some_id = "0123456789abcdef0123456789abcdef"
    calls += [
        ("permits.acquire(lease=1e16)", lambda: pes.acquire(lease=TOO_LONG)),
        ("permits.acquire(lease=0)", lambda: pes.acquire(lease=0)),
        ("permits.release('not an id')", lambda: pes.release("not an id")),
        ("permits.update_lease(id, 1e16)", lambda: pes.update_lease(some_id, TOO_LONG)),
        ("permits.update_lease('xyz', 1)", lambda: pes.update_lease("xyz", 1)),
        ("permits.add_permits(2**70)", lambda: pes.add_permits(2**70)),
    ]
    latch = client.count_down_latch("g5:latch")
    calls += [
        ("latch.try_set_count(-1)", lambda: latch.try_set_count(-1)),
        ("latch.wait(timeout=1e19)", lambda: latch.wait(timeout=1e19)),
        ("latch.wait(timeout=nan)", lambda: latch.wait(timeout=math.nan)),
    ]
    multi = crosslock.MultiLock([client.lock("g5:a"), client.lock("g5:b")])
    calls += [
        ("MultiLock([])", lambda: crosslock.MultiLock([])),
        ("multi.acquire(lease=1e16)", lambda: multi.acquire(lease=TOO_LONG)),
        ("multi.acquire(timeout=1e19)", lambda: multi.acquire(timeout=1e19)),
    ]
    return calls


def test_g5_bad_input_to_every_call_is_an_invalid_argument_and_sends_nothing(server: Server) -> None:
    client = crosslock.connect(server.url)
    scripts_before = server.script_calls()
    wrong = []
    for what, call in bad_calls(client):
        try:
            result = call()
        except crosslock.InvalidArgumentError as e:
            assert str(e), what
            continue
        except BaseException as e:  # noqa: BLE001 - any other outcome is the failure reported
            wrong.append(f"{what}: {type(e).__name__}: {e}")
            continue
        wrong.append(f"{what}: returned {result!r}")
    assert not wrong, "\n".join(wrong)
    assert server.script_calls() == scripts_before, "a refused call ran a script"
    assert server.keys() == []
    for bad in [dict(watchdog_timeout=0), dict(watchdog_timeout=TOO_LONG), dict(response_timeout=math.nan),
                dict(fair_lock_wait_timeout=-1)]:
        with pytest.raises(crosslock.InvalidArgumentError):
            crosslock.connect(server.url, **bad)
    client.close()


def test_g6_a_wrong_password_is_always_the_auth_kind_and_never_unavailable() -> None:
    server = Server("--requirepass", "s3cret")
    try:
        host = f"127.0.0.1:{server.port}"
        for _ in range(10):  # two connections race to fail first: it must not matter which
            with pytest.raises(crosslock.AuthenticationError) as refused:
                crosslock.connect(f"redis://:wrong@{host}/0")
            assert refused.value.code == "AUTH"
        with pytest.raises(crosslock.AuthenticationError):
            crosslock.connect(f"redis://{host}/0")  # no password at all
        client = crosslock.connect(f"redis://:s3cret@{host}/0")
        with client.lock("g6"):
            pass
        client.close()
    finally:
        server.stop()


def test_g6_a_missing_database_and_a_full_server_say_what_they_are(server: Server) -> None:
    with pytest.raises(crosslock.InvalidArgumentError, match="99"):
        crosslock.connect(f"redis://127.0.0.1:{server.port}/99")
    with server.raw() as r:
        connected = int(r.command("INFO", "clients").split("connected_clients:")[1].split()[0])
        r.command("CONFIG", "SET", "maxclients", connected)
        with pytest.raises(crosslock.RedisUnavailableError, match="maxclients"):
            crosslock.connect(server.url, connect_timeout=2)
        r.command("CONFIG", "SET", "maxclients", 10000)


def test_g6_a_connect_refused_on_its_second_connection_leaves_nothing_open(server: Server) -> None:
    # Room for exactly one more client: of a client's two connections (commands, pub/sub) one gets
    # in and the other is refused. The connect fails, and the one that got in is closed.
    with server.raw() as r:

        def clients() -> int:
            return len([line for line in r.command("CLIENT", "LIST").splitlines() if line])

        for _ in range(3):  # which of the two gets the free slot is a race
            before = clients()
            r.command("CONFIG", "SET", "maxclients", before + 1)
            with pytest.raises(crosslock.RedisUnavailableError, match="maxclients"):
                crosslock.connect(server.url, connect_timeout=2)
            wait_until(lambda: clients() <= before, timeout=5, what="the failed connect to leave nothing open")
            r.command("CONFIG", "SET", "maxclients", 10000)


FOREIGN = {
    "a string": [("SET", "{key}", "5")],
    "a plain hash": [("HSET", "{key}", "field", "x")],
    "a list": [("RPUSH", "{key}", "a", "b")],
    "a sorted set": [("ZADD", "{key}", "1", "m")],
}


@pytest.mark.parametrize("foreign", list(FOREIGN))
def test_g7_another_type_of_value_under_the_name_is_a_wrong_type_and_stays_untouched(server: Server, foreign: str) -> None:
    client = crosslock.connect(server.url)
    with server.raw() as r:
        for kind in KIND_IDS + ["semaphore", "permits", "latch"]:
            key = f"g7:{kind}"
            for command in FOREIGN[foreign]:
                r.command(*[part.format(key=key) for part in command])
            r.command("PEXPIRE", key, 600000)
        before = {k: (r.command("DUMP", k), r.command("TYPE", k)) for k in server.keys()}
        calls: list[tuple[str, Callable[[], Any]]] = []
        for kind in KIND_IDS:
            lock = FACTORY[kind](client, f"g7:{kind}")
            calls += [
                (f"{kind}.acquire(blocking=False)", lambda l=lock: l.acquire(blocking=False)),
                (f"{kind}.acquire(timeout=0.2)", lambda l=lock: l.acquire(timeout=0.2)),
                (f"{kind}.force_unlock()", lambda l=lock: l.force_unlock()),
            ]
        sem = client.semaphore("g7:semaphore")
        pes = client.permit_expirable_semaphore("g7:permits")
        latch = client.count_down_latch("g7:latch")
        if foreign != "a string":  # a string is a semaphore's and a latch's own type
            calls += [
                ("semaphore.acquire(timeout=0.2)", lambda: sem.acquire(timeout=0.2)),
                ("semaphore.release()", lambda: sem.release()),
                ("semaphore.available_permits()", lambda: sem.available_permits()),
                ("permits.acquire(timeout=0.2)", lambda: pes.acquire(timeout=0.2)),
                ("latch.count_down()", lambda: latch.count_down()),
                ("latch.wait(timeout=0.2)", lambda: latch.wait(timeout=0.2)),
            ]
        wrong = []
        for what, call in calls:
            try:
                result = call()
            except crosslock.WrongTypeError:
                continue
            except BaseException as e:  # noqa: BLE001
                wrong.append(f"{what}: {type(e).__name__}: {e}")
                continue
            wrong.append(f"{what}: returned {result!r}")
        assert not wrong, "\n".join(wrong)
        after = {k: (r.command("DUMP", k), r.command("TYPE", k)) for k in server.keys()}
        assert after == before, "a refused call changed what was under the name"
        wait_until(lambda: not server.channels(), what="no subscription left")
    client.close()
