"""Input: no credential of any URL form in an error, a log line, a ``repr`` or a CLI message;
every limit of core's table refused before anything is sent; a database index no Redis has is an
invalid argument; a release on another kind's key is ``WRONG_TYPE`` (core/tests/alone/input.rs has the
whole matrix; tests-js/input.test.mjs the same cases for Node)."""

from __future__ import annotations

import io
import logging
import socket
import traceback
from typing import Any, Callable

import pytest

import crosslock
from crosslock import _native
from crosslock.__main__ import main as cli
from support import Raw, RedisServer

SECRET = "s3cr3t"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def secret_urls(live: int, closed: int) -> list[str]:
    """Every URL form with its credentials, each failing to connect in its own way."""
    return [
        f"redis://default:{SECRET}-a@127.0.0.1:{live}/0",  # refused by the server
        f"redis://app:{SECRET}-b@127.0.0.1:{closed}/0",  # nobody there
        f"redis://{SECRET}-c@127.0.0.1:{closed}/0",
        f"redis://:{SECRET}-d@127.0.0.1:{live}/99999999999",
        f"redis://:{SECRET}-e@127.0.0.1:{live}/0?protocol=9",
        f"redis://:pa/{SECRET}-g@127.0.0.1:{closed}/0",
        f"redis://:pa?{SECRET}-h@127.0.0.1:{closed}/0",
        f"rediss://:{SECRET}-i@127.0.0.1:{closed}/0#{SECRET}-frag",
        f"{SECRET}-j@127.0.0.1:{closed}",
        f"redis+unix:///nonexistent/r.sock?user={SECRET}-user&pass={SECRET}-k",
        f"redis+unix:///nonexistent/r.sock?pass={SECRET}-l&db=99999999999",
        f"redis+sentinel://app:{SECRET}-m@127.0.0.1:{closed}/m?sentinel_username={SECRET}-su&sentinel_password={SECRET}-n",
        f"redis+sentinel://127.0.0.1:{closed}/m?sentinel_password={SECRET}-o&unknown=1",
        f"redis+sentinel://127.0.0.1:{closed}/m?sentinel_pasword={SECRET}-p",
        f"redis+sentinel://127.0.0.1:{closed}/m?{SECRET}-q",
        f"redis+sentinel://:{SECRET}-t@127.0.0.1:{closed}/m/99999999999",
        f"redis+cluster://u:{SECRET}-v@127.0.0.1:{closed}?password={SECRET}-w",
        f"redis+cluster://127.0.0.1:{closed}/5?x={SECRET}-x",
    ]


def test_no_credential_of_any_url_form_reaches_an_error_a_log_line_a_repr_or_the_cli(
    redis_server: RedisServer, raw: Raw, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    raw.command("CONFIG", "SET", "requirepass", "right-password")
    locked_server = redis_server
    caplog.set_level(logging.DEBUG, logger="crosslock")
    leaks = []
    for url in secret_urls(locked_server.port, closed_port()):
        with pytest.raises(crosslock.CrosslockError) as caught:
            crosslock.connect(url, connect_timeout=0.5)
        e = caught.value
        shown = "\n".join([str(e), repr(e), repr(e.args), *traceback.format_exception(e)])
        if SECRET in shown:
            leaks.append(f"{url}: {shown}")
        assert cli(["--url", url, "inspect", "x"], out=io.StringIO()) == 2
        err = capsys.readouterr().err
        assert err.startswith("crosslock: "), err
        if SECRET in err:
            leaks.append(f"CLI {url}: {err}")
    # A URL of the wrong type: its text is not echoed either.
    with pytest.raises(crosslock.InvalidArgumentTypeError) as caught:
        crosslock.connect(f"redis://:{SECRET}@127.0.0.1:1/0".encode())  # type: ignore[arg-type]
    if SECRET in str(caught.value):
        leaks.append(f"bytes URL: {caught.value}")
    # A client that connected through a password: its repr, and the logs of a reconnect.
    url = f"redis://default:right-password@127.0.0.1:{locked_server.port}/0"
    client = crosslock.connect(url)
    assert "right-password" not in repr(client)
    with client.lock("secrets"):
        raw.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    client.close()
    for record in caplog.records:
        if SECRET in record.getMessage() or "right-password" in record.getMessage():
            leaks.append(f"log: {record.getMessage()}")
    assert not leaks, "credentials shown:\n" + "\n".join(leaks)


@pytest.mark.parametrize("db", ["99999999999", "2147483648", "-1"])
def test_a_database_index_no_redis_has_is_an_invalid_argument_naming_it_and_the_range(redis_server: RedisServer, db: str) -> None:
    with pytest.raises(crosslock.InvalidArgumentError, match=f"{db}.*0..2\\^31-1"):
        crosslock.connect(f"redis://127.0.0.1:{redis_server.port}/{db}", connect_timeout=0.5)


def script_calls(raw: Raw) -> int:
    calls = 0
    for line in raw.command("INFO", "commandstats").splitlines():
        if line.startswith(("cmdstat_eval", "cmdstat_evalsha")):
            calls += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return calls


def limit_cases(c: crosslock.Client, url: str) -> dict[str, list[tuple[str, Callable[[], Any]]]]:
    """Calls with values just outside each limit of core's table (and of the wrong type)."""
    sem = c.semaphore("limits:sem")
    pes = c.permit_expirable_semaphore("limits:pes")
    latch = c.count_down_latch("limits:latch")
    lock = c.lock("limits:lock")
    lo = {name: low - 1 for name, (low, _, _) in _native.LIMITS.items()}
    hi = {name: high + 1 for name, (_, high, _) in _native.LIMITS.items()}
    return {
        "permits": [
            (f"release({n!r})", lambda n=n: sem.release(n)) for n in (lo["permits"], hi["permits"], None, 1.0)
        ],
        "permits_set": [
            (f"{what}({n!r})", lambda f=f, n=n: f(n))
            for n in (lo["permits_set"], hi["permits_set"], None, "1")
            for what, f in (("sem.try_set_permits", sem.try_set_permits), ("pes.try_set_permits", pes.try_set_permits),
                            ("sem.acquire", sem.acquire))
        ],
        "permit_delta": [
            (f"{what}({n!r})", lambda f=f, n=n: f(n))
            for n in (lo["permit_delta"], hi["permit_delta"], None, 2.5)
            for what, f in (("sem.add_permits", sem.add_permits), ("pes.add_permits", pes.add_permits))
        ],
        "latch_count": [
            (f"try_set_count({n!r})", lambda n=n: latch.try_set_count(n)) for n in (lo["latch_count"], hi["latch_count"], None)
        ],
        "db": [
            (f"connect(…/{n})", lambda n=n: crosslock.connect(url.rsplit("/", 1)[0] + f"/{n}")) for n in (lo["db"], hi["db"])
        ],
        # No Python option sets the watchdog's batch size: the table's entry is Node's and Rust's.
        "watchdog_batch": [],
        "replicas": [
            (f"wait_for_replicas={n!r}", lambda n=n: crosslock.connect(url, wait_for_replicas=n))
            for n in (lo["replicas"], hi["replicas"], 1.5)
        ],
        "scan_limit": [(f"scan(limit={n!r})", lambda n=n: c.scan("*", n)) for n in (lo["scan_limit"], hi["scan_limit"], None)],
        "lease_ms": [
            (f"acquire(lease={s!r})", lambda s=s: lock.acquire(lease=s)) for s in (0, (hi["lease_ms"] + 1000) / 1000)
        ],
        "duration_ms": [
            (f"acquire(timeout={s!r})", lambda s=s: lock.acquire(timeout=s)) for s in ((hi["duration_ms"] + 1000) / 1000,)
        ],
    }


def test_every_limit_of_cores_table_has_a_case(client: crosslock.Client, url: str) -> None:
    assert sorted(_native.LIMITS) == sorted(LIMIT_NAMES) == sorted(limit_cases(client, url))


LIMIT_NAMES = ["permits", "permits_set", "permit_delta", "latch_count", "db", "watchdog_batch", "replicas",
               "scan_limit", "lease_ms", "duration_ms"]


@pytest.mark.parametrize("limit", LIMIT_NAMES)
def test_each_limit_is_refused_before_anything_is_sent(client: crosslock.Client, url: str, raw: Raw, limit: str) -> None:
    cases = limit_cases(client, url)[limit]
    before = script_calls(raw)
    wrong = []
    for what, call in cases:
        try:
            result = call()
        except crosslock.InvalidArgumentError:
            continue
        except BaseException as e:  # noqa: BLE001 - any other outcome is the failure reported
            wrong.append(f"{what}: {type(e).__name__}: {e}")
            continue
        wrong.append(f"{what}: returned {result!r}")
    assert not wrong, "\n".join(wrong)
    assert script_calls(raw) == before, "a refused call ran a script"
    assert raw.command("KEYS", "*") == []


def test_a_multilock_of_no_list_is_an_invalid_argument() -> None:
    for bad in (None, 5, "abc"):
        with pytest.raises(crosslock.InvalidArgumentTypeError, match="list of lock objects"):
            crosslock.MultiLock(bad)  # type: ignore[arg-type]
        with pytest.raises(crosslock.InvalidArgumentTypeError):
            crosslock.RedLock(bad)  # type: ignore[arg-type]


def test_a_fair_lock_release_on_a_read_write_lock_and_a_permit_release_on_a_lock_are_wrong_type(
    client: crosslock.Client, other: crosslock.Client, raw: Raw
) -> None:
    rw = other.read_write_lock("mix:rw")
    assert rw.read_lock().acquire()
    lock = other.lock("mix:lock")
    assert lock.acquire()
    before = {k: raw.command("DUMP", k) for k in raw.command("KEYS", "*")}
    with pytest.raises(crosslock.WrongTypeError, match="read-write lock"):
        client.fair_lock("mix:rw").release()
    with pytest.raises(crosslock.WrongTypeError) as e:
        client.permit_expirable_semaphore("mix:lock").release("0123456789abcdef0123456789abcdef")
    assert "script:" not in str(e.value) and "user_script" not in str(e.value), str(e.value)
    with pytest.raises(crosslock.WrongTypeError) as e:
        client.semaphore("mix:lock").release()
    assert "user_script" not in str(e.value) and "holds a hash" in str(e.value), str(e.value)
    assert {k: raw.command("DUMP", k) for k in raw.command("KEYS", "*")} == before
