"""What an acquire answers the caller: the sync face's :class:`Acquisition`, and the claim of the
async face's native ``PendingHold`` (so a cancellation that races a won acquire leaves nothing
held). Shared by the locks, the semaphores and the multi-lock."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from . import _native
from .errors import LockTimeoutError

__all__ = ["Acquisition"]


def _abandon_if_won(pending: "asyncio.Future[Any]") -> None:
    """The awaiting task was cancelled: give back what the native acquire won, if it did."""
    if pending.done() and not pending.cancelled() and pending.exception() is None:
        pending.result().abandon()


async def _claimed(pending: "asyncio.Future[_native.PendingHold]") -> Any:
    """Awaits a native acquire and claims what it won (see :func:`_acquired_async`)."""
    try:
        outcome = await pending
    except BaseException:
        _abandon_if_won(pending)
        raise
    return outcome.claim()


class Acquisition:
    """What a sync ``acquire()`` returns: truthy (and ``== True``) when acquired, falsy (and
    ``== False``) when not, as ``threading.Lock.acquire``'s ``bool`` (only ``is True`` differs).

    It is also a context manager, so ``with lock.acquire(timeout=2):`` (meant:
    ``lock.acquired(timeout=2)``) never leaves the lock held: leaving the block releases what this
    acquire took; entering it after a failed acquire raises
    :class:`~crosslock.LockTimeoutError` (nothing is held, the block does not run).

    Example::

        with lock.acquire(timeout=2.0):    # as lock.acquired(timeout=2.0)
            ...
    """

    __slots__ = ("_ok", "_release", "_name")

    def __init__(self, ok: bool, release: Callable[[], None], name: str) -> None:
        self._ok, self._release, self._name = ok, release, name

    def __bool__(self) -> bool:
        return self._ok

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Acquisition):
            return self._ok == other._ok
        if isinstance(other, (bool, int)):
            return self._ok == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._ok)

    def __repr__(self) -> str:
        return repr(self._ok)

    def __enter__(self) -> Acquisition:
        if not self._ok:
            raise LockTimeoutError(
                f"{self._name!r} was not acquired (acquire() returned False), so the `with` block "
                "does not run; `with x.acquired(timeout=...)` raises this with who holds it",
                lock_name=self._name,
            )
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._ok:
            self._ok = False  # released once, even if __exit__ is called again
            self._release()
