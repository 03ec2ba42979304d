"""Fixtures shared by every Python suite (tests-py/, tests-py/cross/, tests-py/interop/).

Each test gets its own redis-server on a free 127.0.0.1 port (never 6379), killed afterwards.

Event loops: a module that sets ``EVENT_LOOPS = ("asyncio", "uvloop")`` runs each of its
``async def`` tests on both (pytest-asyncio's loop factories; a test narrows that with
``@loops_only("asyncio")``), and its tests that start loops themselves take the ``run`` fixture
(``asyncio.run`` or ``uvloop.run``). Every other module runs on asyncio's own loop only.

pytest-asyncio ≥ 1.3 makes the loops through its ``pytest_asyncio_loop_factories`` hook. The
newest release that installs on CPython 3.9 (1.2, where tests-versions/run.sh runs the conformance
subset) has no such hook: there each ``async def`` test is parametrized over the module's loops
through the ``event_loop_policy`` fixture instead, with the same test ids.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crosslock  # noqa: E402
from support import Raw, RedisServer, loop_factory_hook  # noqa: E402


#: The event loops a module may ask for, by name: how to make one, and how to run a coroutine on
#: a fresh one (as ``asyncio.run`` does).
LOOPS: dict[str, tuple[Callable[[], asyncio.AbstractEventLoop], Callable[..., Any]]] = {
    "asyncio": (asyncio.new_event_loop, asyncio.run),
    "uvloop": (uvloop.new_event_loop, uvloop.run),
}


def _loops_of(module: Any) -> tuple[str, ...]:
    return tuple(getattr(module, "EVENT_LOOPS", ("asyncio",)))


#: Whether pytest-asyncio makes the loops itself (see :func:`support.loop_factory_hook`).
LOOP_FACTORY_HOOK = loop_factory_hook()

#: The event loop policies of the loops, for pytest-asyncio without the hook.
POLICIES: dict[str, Callable[[], asyncio.AbstractEventLoopPolicy]] = {
    "asyncio": asyncio.DefaultEventLoopPolicy,
    "uvloop": uvloop.EventLoopPolicy,
}


if LOOP_FACTORY_HOOK:

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: pytest.Item
    ) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
        """The event loops this test's module runs its ``async def`` tests on (see the module docs)."""
        module = getattr(item, "module", None)
        return {name: LOOPS[name][0] for name in _loops_of(module)}

else:

    @pytest.fixture
    def event_loop_policy(request: pytest.FixtureRequest) -> asyncio.AbstractEventLoopPolicy:
        """The policy of the loop this ``async def`` test runs on (its parameter), or asyncio's."""
        return POLICIES[getattr(request, "param", "asyncio")]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = _loops_of(metafunc.module)
    if "run" in metafunc.fixturenames:
        metafunc.parametrize("run", [LOOPS[n][1] for n in names], ids=list(names))
    if not LOOP_FACTORY_HOOK and inspect.iscoroutinefunction(metafunc.function) and len(names) > 1:
        marker = metafunc.definition.get_closest_marker("crosslock_loops")
        if marker is not None:
            names = tuple(n for n in names if n in marker.args)
        metafunc.parametrize("event_loop_policy", list(names), ids=list(names), indirect=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "crosslock_loops(*names): the loops an async test runs on (see loops_only)")


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
