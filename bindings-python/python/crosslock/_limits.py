"""Core's table of argument limits (``crosslock::limits`` in Rust, ``limits()`` of Node's native
module): the range of every whole-number argument, spelled once, so a count refused in one
language is refused in every one, before anything is sent."""

from __future__ import annotations

from typing import Optional

from . import _native
from .errors import InvalidArgumentError, InvalidArgumentTypeError

LIMITS: dict[str, tuple[int, int, str]] = dict(_native.LIMITS)


def _whole(value: object, limit: str, what: str, lock_name: Optional[str] = None) -> int:
    """``value`` when it is an ``int`` (not a ``bool``) within core's limit ``limit``; otherwise an
    :class:`~crosslock.errors.InvalidArgumentError` naming ``what`` and the range."""
    low, high, shown = LIMITS[limit]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(
            f"{what} must be a whole number in {shown}, got {type(value).__name__} {value!r}",
            lock_name=lock_name,
        )
    if not low <= value <= high:
        raise InvalidArgumentError(f"{what} must be a whole number in {shown}, got {value}", lock_name=lock_name)
    return value
