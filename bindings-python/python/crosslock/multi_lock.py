"""The :class:`MultiLock` (all of several locks, or none) and the :class:`RedLock` (a majority),
Redisson's ``RMultiLock`` and ``RRedLock`` twins."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Awaitable, Coroutine, Iterable, Optional, Sequence

from . import _native
from ._identity import current_owner
from ._acquisition import Acquisition, _claimed
from ._args import Timeout, _lease, _refuse_in_loop, _seconds, _wait_limit
from ._lockable import _Func, _Lockable, _synchronized
from .errors import InvalidArgumentTypeError

__all__ = ["MultiLock", "RedLock"]


class MultiLock:
    """All of several locks, or none.

    The parts are lock objects of any kind, from any clients — so from different Redis
    deployments (a lock per shard, per tenant, per resource). It has no keys of its own: each part
    is stored, and interoperates with Redisson, as its own kind. It takes the parts in the order
    given (use one order everywhere to avoid deadlocks); when one cannot be had it gives back what
    it took and starts over while its timeout allows (Redisson's algorithm); when one fails (a
    server down), the error names it and nothing is held. Each thread and asyncio task is its own
    holder, as for every lock.

    Example::

        both = crosslock.MultiLock([east.lock("account:1"), west.lock("account:2")])
        with both:          # both, or neither
            ...
    """

    _red = False

    __slots__ = ("_parts", "_native", "_validity", "_guard")

    def __init__(self, locks: Sequence[_Lockable]) -> None:
        if isinstance(locks, (str, bytes)) or not isinstance(locks, Iterable):
            raise InvalidArgumentTypeError(
                f"a {type(self).__name__} is made of a list of lock objects (client.lock(...), …), "
                f"got {type(locks).__name__}"
            )
        parts = list(locks)
        for part in parts:
            if not isinstance(part, _Lockable):
                raise InvalidArgumentTypeError(
                    f"a {type(self).__name__} is made of lock objects (client.lock(...), …), got {type(part).__name__}"
                )
        self._parts = parts
        self._native = _native.MultiLock([p._native for p in parts], self._red)
        self._validity: dict[int, Optional[float]] = {}
        self._guard = threading.Lock()

    @property
    def locks(self) -> list[_Lockable]:
        """The parts, in order."""
        return list(self._parts)

    def acquire(self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None) -> Acquisition:
        """Takes every part (a :class:`RedLock`: a majority) within ``timeout`` seconds
        (``threading.Lock``'s meaning; ``None`` or ``-1``: no limit); a false
        :class:`~crosslock.Acquisition` when it passed, holding nothing (``with
        multi.acquire(...):`` releases on exit). With ``lease``, each part expires between
        ``lease`` and ``lease + timeout`` later; without, each is kept by its client's watchdog.
        A blocking call inside a running asyncio loop raises
        :class:`~crosslock.BlockingInEventLoopError` (use :meth:`acquire_async`)."""
        return Acquisition(self._acquire(blocking, timeout, lease, "multi_lock.acquire()"), self.release, "multi-lock")

    def _acquire(self, blocking: object, timeout: object, lease: Optional[float], form: str) -> bool:
        wait, lease_s = _wait_limit(blocking, timeout, "multi-lock"), _lease(lease, "multi-lock")
        async_form = "`async with multi_lock:`" if form.startswith("`") else "`await multi_lock.acquire_async()`"
        _refuse_in_loop(wait, "multi-lock", form, async_form, f"one of its parts {[p.name for p in self._parts]!r}")
        return self._took(self._native.acquire(current_owner(), wait, lease_s))

    def acquire_async(self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None) -> Coroutine[Any, Any, bool]:
        """:meth:`acquire` for asyncio; cancelling it leaves nothing held. The holder is the task
        that calls it, also when another awaits it (``asyncio.wait_for`` before 3.12, ``gather``)."""
        wait, lease_s = _wait_limit(blocking, timeout, "multi-lock"), _lease(lease, "multi-lock")
        return self._acquire_as(current_owner(), wait, lease_s)

    async def _acquire_as(self, owner: int, wait: Optional[float], lease: Optional[float]) -> bool:
        held: Optional[tuple[Optional[float], list[str]]] = await _claimed(self._native.acquire_async(owner, wait, lease))
        return self._took(held, owner)

    def release(self) -> None:
        """Releases every part the calling thread (or task) holds. Raises
        :class:`~crosslock.LockLostError` when the acquisition was lost (as :attr:`lost` says); a
        :class:`RedLock` whose lost parts are a minority is released without error (the lost
        part is logged)."""
        self._native.release(current_owner())

    def release_async(self) -> Awaitable[None]:
        """:meth:`release` for asyncio (the calling task's hold, also when another task awaits it)."""
        return self._native.release_async(current_owner())

    def extend(self, lease: float) -> None:
        """Sets the lease of every part the calling thread (or task) holds to ``lease`` seconds
        from now, as :meth:`Lock.extend <crosslock.Lock.extend>` does (parts kept by the watchdog
        become parts with that lease); a :class:`RedLock`'s :attr:`~RedLock.validity` becomes
        ``lease − time to extend − clock drift``. Fine while every part (a :class:`RedLock`: a
        majority) was extended; else raises :class:`~crosslock.LockLostError` naming a lost part,
        or the first part's error (:class:`~crosslock.NotHeldError` when the caller holds none)."""
        validity = self._native.extend(current_owner(), _seconds(lease, "lease", "multi-lock"))
        self._extended(validity)

    def extend_async(self, lease: float) -> Coroutine[Any, Any, None]:
        """:meth:`extend` for asyncio (the calling task's acquisition, also when another task
        awaits it)."""
        return self._extend_as(current_owner(), _seconds(lease, "lease", "multi-lock"))

    async def _extend_as(self, owner: int, lease: float) -> None:
        self._extended(await self._native.extend_async(owner, lease), owner)

    def _extended(self, validity: float, owner: Optional[int] = None) -> None:
        with self._guard:
            self._validity[current_owner() if owner is None else owner] = validity

    def __call__(self, func: _Func) -> _Func:
        """Used as a decorator: each call of ``func`` (sync or ``async def``) runs holding every
        part, as ``with multi:`` / ``async with multi:``."""
        return _synchronized(self, func)

    @property
    def lost(self) -> bool:
        """``True`` once too many parts of the calling thread's (or task's) acquisition may be
        lost: any part for a :class:`MultiLock`; for a :class:`RedLock`, once fewer than a
        majority of all its parts are still held. Each part decides from the clock on the spot,
        as :attr:`Lock.lost <crosslock.Lock.lost>` does."""
        return self._native.is_lost(current_owner())

    def __enter__(self) -> MultiLock:
        self._acquire(True, -1, None, "`with multi_lock:`")
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.release()

    async def __aenter__(self) -> MultiLock:
        await self.acquire_async()
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.release_async()

    def __repr__(self) -> str:
        return f"<crosslock.{type(self).__name__} {[p.name for p in self._parts]!r}>"

    def _took(self, held: Optional[tuple[Optional[float], list[str]]], owner: Optional[int] = None) -> bool:
        if held is None:
            return False
        with self._guard:
            self._validity[current_owner() if owner is None else owner] = held[0]
        return True


class RedLock(MultiLock):
    """A majority of locks on independent Redis masters: the Redlock algorithm, Redisson's
    ``RRedLock``.

    As :class:`MultiLock`, but it is acquired once ``n//2 + 1`` of the ``n`` parts are held, and
    with a lease :attr:`validity` says for how long the locks are certainly held:
    ``lease − time to acquire − clock drift``.

    Redisson deprecates ``RRedLock`` ("use RLock or RFencedLock instead"): a majority of expiring
    locks does not make a pause-proof lock. For correctness under pauses, prefer a
    :class:`~crosslock.FencedLock`, whose tokens let the protected resource refuse a stale
    holder's writes.

    Example::

        red = crosslock.RedLock([c.lock("job:7") for c in clients])   # independent servers
        if red.acquire(timeout=2.0, lease=10.0):
            print("valid for", red.validity, "s")
            red.release()
    """

    _red = True

    __slots__ = ()

    @property
    def validity(self) -> Optional[float]:
        """Seconds the calling thread's (or task's) last acquisition was certainly valid for when
        it was made (with a lease; ``None`` without, or before any)."""
        with self._guard:
            return self._validity.get(current_owner())
