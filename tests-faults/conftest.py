"""Fixtures of the fault-injection suite: each test gets its own redis-server (see harness.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Server  # noqa: E402


@pytest.fixture
def server() -> Iterator[Server]:
    """A fresh redis-server (no persistence) for this test."""
    s = Server()
    try:
        yield s
    finally:
        s.stop()
