"""Fixtures shared by every Python suite (tests-py/, tests-py/cross/, tests-py/interop/).

Each test gets its own redis-server on a free 127.0.0.1 port (never 6379), killed afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crosslock  # noqa: E402
from support import Raw, RedisServer  # noqa: E402


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
