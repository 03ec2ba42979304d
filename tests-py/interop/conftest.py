"""Fixtures for the Redisson interop tests: a real Redisson client (the Java driver in its own JVM)
on the per-test throwaway redis-server of ``tests-py/conftest.py`` (``redis_url``, ``raw``,
``client`` and ``fast_client`` come from there)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from java_driver import JavaDriver, ensure_built  # noqa: E402


@pytest.fixture(scope="session")
def java_built() -> None:
    """Builds tests-java once per session; fails (never skips) without java/mvn."""
    ensure_built()


@pytest.fixture
def java(java_built, redis_url):
    """A Redisson client in its own JVM, connected to this test's redis-server (watchdog 30 s)."""
    driver = JavaDriver.start()
    try:
        driver.connect(redis_url)
        yield driver
    finally:
        driver.close()
