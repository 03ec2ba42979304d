"""Argument checks shared by every object's host class: seconds, wait limits and leases, counts
of permits. Each raises the message the tests (tests-py/test_input.py) pin, before anything is
sent; core checks the ranges again. A leaf: it imports only the native module's tables and the
errors."""

from __future__ import annotations

import asyncio
from typing import Optional

from ._limits import _whole
from .errors import BlockingInEventLoopError, InvalidArgumentError, InvalidArgumentTypeError

__all__: list[str] = []

#: A wait limit: seconds, ``-1`` or ``None`` for no limit.
Timeout = Optional[float]


def _seconds(value: object, what: str, lock_name: Optional[str] = None) -> float:
    """``value`` as float seconds; the type and float range are checked here, the rest by core."""
    where = f" of lock {lock_name!r}" if lock_name is not None else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentTypeError(
            f"the {what}{where} must be a number of seconds, got {type(value).__name__} {value!r}",
            lock_name=lock_name,
        )
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(
            f"the {what}{where} is too large to be a number of seconds (an int of "
            f"{len(str(abs(int(value))))} digits); the longest is 2**53-1 ms, about 285,000 years",
            lock_name=lock_name,
        ) from None


def _wait_limit(blocking: object, timeout: object, lock_name: str) -> Optional[float]:
    """``threading.Lock.acquire``'s ``blocking``/``timeout`` as core's wait limit: ``None`` waits
    without limit, ``0.0`` tries once. ``timeout=None`` means no limit, as ``-1`` does."""
    if not isinstance(blocking, bool):
        hint = f"; did you mean timeout={blocking!r}?" if isinstance(blocking, (int, float)) else ""
        raise InvalidArgumentTypeError(
            f"blocking of {lock_name!r} must be True or False, got {type(blocking).__name__} "
            f"{blocking!r}{hint}",
            lock_name=lock_name,
        )
    seconds = -1.0 if timeout is None else _seconds(timeout, "timeout", lock_name)
    if not blocking:
        if seconds != -1:
            raise InvalidArgumentError(
                f"can't specify a timeout for a non-blocking call (lock {lock_name!r}): pass "
                "either blocking=False or a timeout",
                lock_name=lock_name,
            )
        return 0.0
    if seconds == -1:
        return None
    return seconds  # core rejects negative, NaN and infinite values with a clear message


def _refuse_in_loop(
    wait: Optional[float], name: str, sync_form: str, async_form: str, what: Optional[str] = None
) -> None:
    """Refuses a blocking wait (anything but a single try) on a thread whose asyncio event loop is
    running, before anything is sent: it would block the loop, and with it every other task,
    including one that holds what it waits for (a certain deadlock)."""
    if wait == 0.0 or asyncio._get_running_loop() is None:
        return
    raise BlockingInEventLoopError(
        f"{sync_form} inside a running asyncio event loop would block the loop (and every task on "
        f"it, including any that holds {what or repr(name)}) while it waits; use {async_form} instead, or "
        "run the blocking call in a thread (await asyncio.to_thread(...))",
        lock_name=None if what else name,
    )


def _lease(lease: object, lock_name: str) -> Optional[float]:
    return None if lease is None else _seconds(lease, "lease", lock_name)


def _permits(value: object, name: str, low: int = 1) -> int:
    """A number of permits to take or give back (``low`` 1), or to set (``low`` 0)."""
    return _whole(value, "permits" if low else "permits_set", f"the permits of semaphore {name!r}", name)


def _delta(value: object, name: str) -> int:
    """A number of permits to add (negative: remove), within Redisson's ``int``."""
    return _whole(value, "permit_delta", f"the permits to add to semaphore {name!r}", name)
