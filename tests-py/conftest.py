"""Fixtures shared by every Python suite (tests-py/, tests-py/cross/, tests-py/interop/).

Each test gets its own redis-server on a free 127.0.0.1 port (never 6379), killed afterwards.

Event loops: a module that sets ``EVENT_LOOPS = ("asyncio", "uvloop")`` runs each of its
``async def`` tests on both (pytest-asyncio's loop factories; a test narrows that with
``@pytest.mark.asyncio(loop_factories=["asyncio"])``), and its tests that start loops themselves
take the ``run`` fixture (``asyncio.run`` or ``uvloop.run``). Every other module runs on asyncio's
own loop only.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crosslock  # noqa: E402
from support import Raw, RedisServer  # noqa: E402


#: The event loops a module may ask for, by name: how to make one, and how to run a coroutine on
#: a fresh one (as ``asyncio.run`` does).
LOOPS: dict[str, tuple[Callable[[], asyncio.AbstractEventLoop], Callable[..., Any]]] = {
    "asyncio": (asyncio.new_event_loop, asyncio.run),
    "uvloop": (uvloop.new_event_loop, uvloop.run),
}


def _loops_of(module: Any) -> tuple[str, ...]:
    return tuple(getattr(module, "EVENT_LOOPS", ("asyncio",)))


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The event loops this test's module runs its ``async def`` tests on (see the module docs)."""
    module = getattr(item, "module", None)
    return {name: LOOPS[name][0] for name in _loops_of(module)}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "run" in metafunc.fixturenames:
        names = _loops_of(metafunc.module)
        metafunc.parametrize("run", [LOOPS[n][1] for n in names], ids=list(names))


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server for this test."""
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    """``redis://127.0.0.1:<port>/0`` of this test's server."""
    return redis_server.url


@pytest.fixture
def redis_url(url: str) -> str:
    """Alias of ``url`` (the name the cross-language and interop suites use)."""
    return url


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[Raw]:
    """A plain RESP connection to this test's server, for looking at the raw layout."""
    with redis_server.raw() as r:
        yield r


@pytest.fixture
def client(url: str) -> Iterator[crosslock.Client]:
    """A crosslock client with the default options, closed after the test."""
    c = crosslock.connect(url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def other(url: str) -> Iterator[crosslock.Client]:
    """A second crosslock client of this test's server (another process, as Redis sees it)."""
    c = crosslock.connect(url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def fast_client(url: str) -> Iterator[crosslock.Client]:
    """A client whose watchdog lease is 0.6 s (renewed every 0.2 s), for renewal and loss tests."""
    c = crosslock.connect(url, watchdog_timeout=0.6)
    try:
        yield c
    finally:
        c.close()
