"""The counting :class:`Semaphore`, Redisson's ``RSemaphore`` twin."""

from __future__ import annotations

from types import TracebackType
from typing import Optional

from . import _native
from ._acquisition import Acquisition, _claimed
from ._args import Timeout, _delta, _permits, _refuse_in_loop, _wait_limit
from ._types import ClientLike

__all__ = ["Semaphore"]


class Semaphore:
    """A counting semaphore shared by every process (Python, Node, Rust, Java on Redisson) that
    uses the same name on the same Redis.

    Get one with :meth:`crosslock.Client.semaphore`. Stored exactly as Redisson's
    ``RSemaphore``: a string at the name holding the permits available, and the channel
    ``redisson_sc:{name}`` on which each release publishes how many are available.

    **Permits have no owner**: any thread, task or process may release them, and they never
    expire, so *a process that crashes holding permits never gives them back* — use a
    :class:`~crosslock.PermitExpirableSemaphore` when that matters. Set the permits once with
    :meth:`try_set_permits` (an unset semaphore has none).

    Waiters are woken by releases (no polling); the waiters of one process take their turns in
    order, so a waiter for several permits is not starved by later ones taking single permits.

    Example::

        slots = client.semaphore("render-slots")
        slots.try_set_permits(4)
        with slots:                         # one permit, given back on exit
            ...
        if slots.acquire(2, timeout=5.0):   # two permits, waiting at most 5 s
            try:
                ...
            finally:
                slots.release(2)
    """

    __slots__ = ("_client", "_native")

    def __init__(self, client: ClientLike, native: _native.Semaphore) -> None:
        self._client = client
        self._native = native

    @property
    def name(self) -> str:
        """The semaphore's name: its key in Redis."""
        return self._native.name

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits unless it is set already; ``True`` if it set them."""
        return self._native.try_set_permits(_permits(permits, self.name, 0))

    async def try_set_permits_async(self, permits: int) -> bool:
        """:meth:`try_set_permits` for asyncio."""
        return await self._native.try_set_permits_async(_permits(permits, self.name, 0))

    def acquire(self, permits: int = 1, timeout: Timeout = -1, *, blocking: bool = True) -> Acquisition:
        """Takes ``permits`` permits, waiting at most ``timeout`` seconds (``-1`` or ``None``: as
        long as it takes; ``blocking=False``: one try). Returns a false :class:`~crosslock.Acquisition`
        (``== False``) when the wait limit passed with Redis answering (no permits), a true one
        otherwise; ``with sem.acquire(2):`` gives the permits back on exit. Raises
        :class:`~crosslock.RedisUnavailableError` when it passed with Redis out of reach, and
        :class:`~crosslock.BlockingInEventLoopError` for a blocking call inside a running asyncio
        loop (use :meth:`acquire_async`). The wait releases the GIL; Ctrl-C interrupts it and
        takes nothing."""
        n = _permits(permits, self.name, 0)
        wait = _wait_limit(blocking, timeout, self.name)
        _refuse_in_loop(wait, self.name, "semaphore.acquire()", "`await semaphore.acquire_async()`")
        taken = self._native.acquire(n, wait)
        return Acquisition(taken, (lambda: self.release(n)) if n else _no_op, self.name)

    def acquired(self, permits: int = 1, timeout: Timeout = -1) -> _Acquired:
        """A context manager (``with`` and ``async with``) that takes ``permits`` permits within
        ``timeout`` seconds (``-1``/``None``: no limit) or raises
        :class:`~crosslock.LockTimeoutError`, and gives them back on exit.

        Example::

            with slots.acquired(2, timeout=5.0):
                ...
        """
        return _Acquired(self, _permits(permits, self.name), _wait_limit(True, timeout, self.name))

    async def acquire_async(self, permits: int = 1, timeout: Timeout = -1, *, blocking: bool = True) -> bool:
        """:meth:`acquire` for asyncio; cancelling it takes nothing (permits taken in the same
        instant are given back)."""
        n = _permits(permits, self.name, 0)
        taken: bool = await _claimed(self._native.acquire_async(n, _wait_limit(blocking, timeout, self.name)))
        return taken

    def release(self, permits: int = 1) -> None:
        """Gives ``permits`` back (anyone may) and wakes waiters."""
        self._native.release(_permits(permits, self.name))

    async def release_async(self, permits: int = 1) -> None:
        """:meth:`release` for asyncio."""
        await self._native.release_async(_permits(permits, self.name))

    def release_if_exists(self, permits: int = 1) -> bool:
        """Gives ``permits`` back only if the semaphore exists (Redisson's ``releaseIfExists``):
        whether it did. An absent semaphore (never set up, or deleted) stays absent and nobody is
        woken; :meth:`release` would create it."""
        return self._native.release_if_exists(_permits(permits, self.name))

    async def release_if_exists_async(self, permits: int = 1) -> bool:
        """:meth:`release_if_exists` for asyncio."""
        return await self._native.release_if_exists_async(_permits(permits, self.name))

    def available_permits(self) -> int:
        """How many permits are available now (0 when never set)."""
        return self._native.available_permits()

    async def available_permits_async(self) -> int:
        """:meth:`available_permits` for asyncio."""
        return await self._native.available_permits_async()

    def add_permits(self, permits: int) -> int:
        """Adds ``permits`` (negative: removes) to what is available; returns the new count."""
        return self._native.add_permits(_delta(permits, self.name))

    async def add_permits_async(self, permits: int) -> int:
        """:meth:`add_permits` for asyncio."""
        return await self._native.add_permits_async(_delta(permits, self.name))

    def drain_permits(self) -> int:
        """Takes every available permit; returns how many."""
        return self._native.drain_permits()

    async def drain_permits_async(self) -> int:
        """:meth:`drain_permits` for asyncio."""
        return await self._native.drain_permits_async()

    def delete(self) -> bool:
        """Deletes the semaphore's counter; ``True`` if it existed."""
        return self._native.delete()

    async def delete_async(self) -> bool:
        """:meth:`delete` for asyncio."""
        return await self._native.delete_async()

    def __enter__(self) -> Semaphore:
        _refuse_in_loop(None, self.name, "`with semaphore:`", "`async with semaphore:`")
        self._native.acquire(1, None)
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.release(1)

    async def __aenter__(self) -> Semaphore:
        await self.acquire_async(1)
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.release_async(1)

    def __repr__(self) -> str:
        return f"<crosslock.Semaphore {self.name!r}>"


def _no_op() -> None:
    pass


class _Acquired:
    """What :meth:`Semaphore.acquired` returns."""

    __slots__ = ("_sem", "_permits", "_wait")

    def __init__(self, sem: Semaphore, permits: int, wait: Optional[float]) -> None:
        self._sem, self._permits, self._wait = sem, permits, wait

    def __enter__(self) -> Semaphore:
        _refuse_in_loop(self._wait, self._sem.name, "`with semaphore.acquired(...):`", "`async with semaphore.acquired(...):`")
        self._sem._native.acquire(self._permits, self._wait, True)
        return self._sem

    def __exit__(self, *exc_info: object) -> None:
        self._sem.release(self._permits)

    async def __aenter__(self) -> Semaphore:
        await _claimed(self._sem._native.acquire_async(self._permits, self._wait, True))
        return self._sem

    async def __aexit__(self, *exc_info: object) -> None:
        await self._sem.release_async(self._permits)
