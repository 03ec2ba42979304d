"""House rule: the async face is complete, in the native module and in the public package, and
what docs/api.md says about it holds.

The native classes get their twins from one macro (``py_twins!`` in bindings-python/src/twins.rs),
so a native method ``x`` that talks to Redis has ``x_async``; the lists below name the methods
that do not, and why. The public classes are written by hand over them, so the same rule is
checked there: docs/api.md promises that every Python I/O method has an ``_async`` twin.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import crosslock
from crosslock import _native

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"

#: Native methods with no ``_async`` twin: none of them waits on Redis.
NATIVE_SYNC_ONLY = {
    # answered from the client's own state
    "Client.holder", "Client.set_lost_listener", "Client.subscribed_channels", "Client.watched_locks",
    # factories: a handle, no round trip
    "Client.lock", "Client.fair_lock", "Client.spin_lock", "Client.fenced_lock",
    "Client.non_reentrant_lock", "Client.non_reentrant_fair_lock", "Client.semaphore",
    "Client.permit_expirable_semaphore",
    "Client.count_down_latch", "Client.group_lock", "Client.read_write_lock",
    # the command-line tool's calls (crosslock/__main__.py runs them blocking)
    "Client.describe", "Client.force_unlock_any",
    # decided from the clock, no round trip
    "Lock.is_lost", "MultiLock.is_lost", "PermitExpirableSemaphore.is_lost",
    # a won acquire's hand-over, on the awaiting side already
    "PendingHold.claim", "PendingHold.abandon",
    # a watch's own end
    "Watch.close",
}

#: Public methods with no ``_async`` twin: none of them does I/O (or it has an async form of
#: another name: ``with``/``async with``, ``for``/``async for``).
PUBLIC_SYNC_ONLY = {
    # answered from the client's own state, or handles made without a round trip
    "Client.holder", "Client.lock", "Client.fair_lock", "Client.spin_lock", "Client.fenced_lock",
    "Client.non_reentrant_lock", "Client.non_reentrant_fair_lock", "Client.read_write_lock",
    "Client.semaphore", "Client.permit_expirable_semaphore", "Client.count_down_latch",
    "Client.group_lock",
    "ReadWriteLock.read_lock", "ReadWriteLock.write_lock",
    # `close()`'s async form is `aclose()` (and `async with`), whose sync form is `close()`
    "Client.close", "Client.aclose",
    # context-manager factories: `with x.acquired():` / `async with x.acquired():`
    "acquired",
    # decided from the clock, no round trip; an asyncio.Event made on the spot
    "lost", "lost_event",
    # a watch: `for e in watch` / `async for e in watch`
    "Watch.next", "Watch.close",
}

#: The public classes whose methods the rule covers.
PUBLIC_CLASSES = [
    crosslock.Client, crosslock.Lock, crosslock.FairLock, crosslock.SpinLock,
    crosslock.FencedLock, crosslock.NonReentrantLock, crosslock.NonReentrantFairLock,
    crosslock.GroupLock, crosslock.ReadWriteLock, crosslock.ReadLock, crosslock.WriteLock,
    crosslock.MultiLock, crosslock.RedLock, crosslock.Semaphore,
    crosslock.PermitExpirableSemaphore, crosslock.CountDownLatch, crosslock.Watch,
]


def _methods(cls: type) -> dict[str, Any]:
    """The public methods of ``cls`` (properties and attributes left out)."""
    found = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property) or type(value).__name__ == "getset_descriptor":
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if callable(value):
            found[name] = getattr(cls, name)
    return found


def _missing_twins(cls: type, sync_only: set[str]) -> list[str]:
    methods = _methods(cls)
    missing = []
    for name in methods:
        if name.endswith("_async"):
            if name[: -len("_async")] not in methods:
                missing.append(f"{cls.__name__}.{name} (no sync face)")
            continue
        if name in sync_only or f"{cls.__name__}.{name}" in sync_only:
            continue
        if f"{name}_async" not in methods:
            missing.append(f"{cls.__name__}.{name}")
    return missing


def _native_classes() -> list[type]:
    return [v for _, v in sorted(vars(_native).items()) if isinstance(v, type) and v.__module__ == "crosslock._native"
            and not issubclass(v, BaseException)]


def test_every_native_io_method_has_an_async_twin() -> None:
    missing = [m for cls in _native_classes() for m in _missing_twins(cls, NATIVE_SYNC_ONLY)]
    assert missing == [], f"native methods without an _async twin (py_twins! writes both): {missing}"


def _stale(sync_only: set[str], classes: list[type]) -> list[str]:
    """Entries of ``sync_only`` that name no method: ``Class.method``, or ``method`` of any class."""
    by_name = {cls.__name__: _methods(cls) for cls in classes}
    everywhere = {name for methods in by_name.values() for name in methods}
    return sorted(
        entry for entry in sync_only
        if (entry.partition(".")[2] not in by_name.get(entry.partition(".")[0], {}) if "." in entry
            else entry not in everywhere)
    )


def test_the_sync_only_lists_name_real_methods() -> None:
    assert _stale(NATIVE_SYNC_ONLY, _native_classes()) == []
    assert _stale(PUBLIC_SYNC_ONLY, PUBLIC_CLASSES) == []


def test_every_public_io_method_has_an_async_twin() -> None:
    # docs/api.md: "Every Python I/O method also has an `_async` twin (`acquire_async`, …)".
    assert "Every Python I/O method also has an `_async` twin" in API_MD.read_text()
    missing = [m for cls in PUBLIC_CLASSES for m in _missing_twins(cls, PUBLIC_SYNC_ONLY)]
    assert missing == [], f"public methods without an _async twin, against docs/api.md: {missing}"


def test_public_async_twins_are_awaitable_and_take_the_sync_arguments() -> None:
    for cls in PUBLIC_CLASSES:
        methods = _methods(cls)
        for name, twin in methods.items():
            if not name.endswith("_async"):
                continue
            sync = methods[name[: -len("_async")]]
            returns = str(inspect.signature(twin).return_annotation)
            assert inspect.iscoroutinefunction(twin) or re.search(r"\b(Awaitable|Coroutine)\b", returns), (
                f"{cls.__name__}.{name} answers no awaitable ({returns})"
            )
            sync_params = [p.name for p in inspect.signature(sync).parameters.values()]
            twin_params = [p.name for p in inspect.signature(twin).parameters.values()]
            assert twin_params == sync_params, f"{cls.__name__}.{name}{twin_params} vs {sync_params}"


def test_every_async_name_docs_api_md_uses_exists() -> None:
    text = API_MD.read_text()
    named = set(re.findall(r"\b([a-z_]+_async)\(", text))
    assert named, "docs/api.md names no _async method any more: update this test"
    public = {name for cls in PUBLIC_CLASSES for name in _methods(cls)} | set(crosslock.__all__)
    assert sorted(named - public) == []
