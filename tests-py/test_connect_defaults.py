"""Core owns the connect defaults: the package's ``connect``/``connect_async`` take theirs from
the native module's table (``_native.CONNECT_DEFAULTS``, ``_native.DEFAULT_LANES``, read from
core's ``ClientOptions::default()``), the native ``connect`` leaves an option it is given as
``None`` to core, and a client connected with no options runs on them. The defaults written in
the docs are tied to core's values by ``core/tests/house_rules.rs``
(``written_connect_defaults_are_cores``)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

import crosslock
from crosslock import _native
from support import Raw

# Every keyword of connect() that has a default of core's, and the table entry it comes from.
CORE_DEFAULTS = {
    "connect_timeout": _native.CONNECT_DEFAULTS["connect_timeout"],
    "response_timeout": _native.CONNECT_DEFAULTS["response_timeout"],
    "watchdog_timeout": _native.CONNECT_DEFAULTS["watchdog_timeout"],
    "fair_lock_wait_timeout": _native.CONNECT_DEFAULTS["fair_lock_wait_timeout"],
    "replica_wait_timeout": _native.CONNECT_DEFAULTS["replica_wait_timeout"],
    "lanes": _native.DEFAULT_LANES,
}


def test_the_native_table_holds_cores_defaults() -> None:
    assert set(_native.CONNECT_DEFAULTS) == set(CORE_DEFAULTS) - {"lanes"}
    assert all(isinstance(v, float) and v > 0 for v in _native.CONNECT_DEFAULTS.values())
    assert _native.DEFAULT_LANES in ("all", "sync", "none")
    # The values core's ClientOptions::default() documents (a change there is a change here).
    assert CORE_DEFAULTS == {
        "connect_timeout": 5.0,
        "response_timeout": 3.0,
        "watchdog_timeout": 30.0,
        "fair_lock_wait_timeout": 300.0,
        "replica_wait_timeout": 1.0,
        "lanes": "all",
    }


@pytest.mark.parametrize("face", [crosslock.connect, crosslock.connect_async], ids=["sync", "async"])
def test_connect_defaults_are_the_native_tables(face: object) -> None:
    parameters = inspect.signature(face).parameters  # type: ignore[arg-type]
    for name, value in CORE_DEFAULTS.items():
        assert parameters[name].default == value, name
    # Those without one of core's are "not set".
    for name in ("tls_ca_cert", "wait_for_replicas", "client_name"):
        assert parameters[name].default is None, name


def test_the_native_connect_leaves_options_given_as_none_to_core(url: str) -> None:
    native = _native.Client.connect(url)
    try:
        assert not native.closed
    finally:
        native.close()
    native = _native.Client.connect(
        url,
        connect_timeout=None,
        response_timeout=None,
        watchdog_timeout=None,
        fair_lock_wait_timeout=None,
        tls_ca_cert=None,
        wait_for_replicas=None,
        replica_wait_timeout=None,
        client_name=None,
        lanes=None,
    )
    native.close()

    async def connect_async() -> None:
        client = await _native.Client.connect_async(url, watchdog_timeout=None, lanes=None)
        client.close()

    asyncio.run(connect_async())


def test_the_package_still_refuses_none_where_it_did(url: str) -> None:
    # None is core's "default" for the native module only: the public keywords refuse it as before.
    with pytest.raises(crosslock.InvalidArgumentTypeError, match="lanes"):
        crosslock.connect(url, lanes=None)  # type: ignore[arg-type]
    with pytest.raises(crosslock.InvalidArgumentTypeError, match="watchdog_timeout"):
        crosslock.connect(url, watchdog_timeout=None)  # type: ignore[arg-type]


def test_a_client_with_no_options_leases_for_cores_watchdog_timeout(url: str, raw: Raw) -> None:
    watchdog_ms = CORE_DEFAULTS["watchdog_timeout"] * 1000  # type: ignore[operator]
    with crosslock.connect(url) as client:
        with client.lock("defaults:watchdog"):
            ttl = raw.command("PTTL", "defaults:watchdog")
    # The lease is the watchdog timeout, renewed every third of it: never above, never under 2/3.
    assert watchdog_ms * 2 / 3 < ttl <= watchdog_ms
