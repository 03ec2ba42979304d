"""The :class:`CountDownLatch`, Redisson's ``RCountDownLatch`` twin."""

from __future__ import annotations

from typing import Optional

from . import _native
from ._limits import _whole
from ._args import _refuse_in_loop, _seconds
from ._types import ClientLike

__all__ = ["CountDownLatch"]


class CountDownLatch:
    """A count-down latch shared by every process (Python, Node, Rust, Java on Redisson) using the
    same name on the same Redis: waiters wait until the count reaches zero; anyone counts down.

    Get one with :meth:`crosslock.Client.count_down_latch`. Stored exactly as Redisson's
    ``RCountDownLatch``: the count at the name, and the channel
    ``redisson_countdownlatch__channel__{name}`` on which ``0`` is published when it reaches zero
    (every waiter wakes). An absent count means open.

    A waiter subscribes before it looks at the count, so a latch that opens meanwhile is never
    missed (Redisson's untimed ``await()`` can miss it and wait for ever).

    Example::

        ready = client.count_down_latch("workers-ready")
        ready.try_set_count(3)          # the coordinator
        ready.count_down()              # each of 3 workers, anywhere
        if ready.wait(timeout=30):      # anyone: True once all 3 counted down
            ...
    """

    __slots__ = ("_client", "_native")

    def __init__(self, client: ClientLike, native: _native.CountDownLatch) -> None:
        self._client = client
        self._native = native

    @property
    def name(self) -> str:
        """The latch's name: its key in Redis."""
        return self._native.name

    def try_set_count(self, count: int) -> bool:
        """Sets the count (at least 1) unless the latch is counting; ``True`` if it set it."""
        return self._native.try_set_count(self._count(count))

    async def try_set_count_async(self, count: int) -> bool:
        """:meth:`try_set_count` for asyncio."""
        return await self._native.try_set_count_async(self._count(count))

    def count_down(self) -> int:
        """Counts down by one (anyone may); at zero every waiter wakes. Returns the count left."""
        return self._native.count_down()

    async def count_down_async(self) -> int:
        """:meth:`count_down` for asyncio."""
        return await self._native.count_down_async()

    def count(self) -> int:
        """The count now (0: open)."""
        return self._native.count()

    async def count_async(self) -> int:
        """:meth:`count` for asyncio."""
        return await self._native.count_async()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the count reaches zero, at most ``timeout`` seconds (``None``: as long as it
        takes); ``True`` once open. Releases the GIL; Ctrl-C interrupts it. Inside a running
        asyncio loop only ``timeout=0`` (a look) is allowed, else
        :class:`~crosslock.BlockingInEventLoopError`: use :meth:`wait_async` there."""
        wait = self._timeout(timeout)
        _refuse_in_loop(wait, self.name, "latch.wait()", "`await latch.wait_async()`")
        return self._native.wait(wait)

    async def wait_async(self, timeout: Optional[float] = None) -> bool:
        """:meth:`wait` for asyncio."""
        return await self._native.wait_async(self._timeout(timeout))

    def delete(self) -> bool:
        """Deletes the latch; ``True`` if it existed."""
        return self._native.delete()

    async def delete_async(self) -> bool:
        """:meth:`delete` for asyncio."""
        return await self._native.delete_async()

    def __repr__(self) -> str:
        return f"<crosslock.CountDownLatch {self.name!r}>"

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        if timeout is None:
            return None
        seconds = _seconds(timeout, "timeout", self.name)
        return None if seconds == -1 else seconds  # -1: no limit, as for locks

    def _count(self, count: object) -> int:
        return _whole(count, "latch_count", f"the count of latch {self.name!r}", self.name)
