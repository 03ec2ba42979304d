"""The :class:`FencedLock`, Redisson's ``RFencedLock`` twin: a lock with fencing tokens."""

from __future__ import annotations

from typing import Awaitable, Optional

from ._args import Timeout, _lease, _wait_limit
from ._lockable import _Acquired, _Lockable

__all__ = ["FencedLock"]


class FencedLock(_Lockable):
    """A reentrant lock whose every acquisition gets a **fencing token**: an ``int`` strictly
    greater than every token handed out before on this lock, by any client in any language.

    Get one with :meth:`crosslock.Client.fenced_lock`. Stored exactly as Redisson's
    ``RFencedLock``: the ``RLock`` hash and channel, and a counter at
    ``redisson_lock_token:{name}`` taken on every acquisition (re-entries included).

    A lock alone cannot stop a holder that lost it without knowing (a long pause, a partition)
    from writing after someone else took over; fencing can. Send the token with every write to the
    protected resource and have it refuse a token older than the newest it has seen.

    ``with lock as token:`` binds the token; :meth:`acquire_token` returns it (or ``None``);
    ``acquire()`` returns ``True``/``False`` as for every lock.

    Example::

        lock = client.fenced_lock("ledger")
        with lock as token:
            storage.write(row, fencing_token=token)

        token = lock.acquire_token(timeout=2.0)
        if token is not None:
            try:
                storage.write(row, fencing_token=token)
            finally:
                lock.release()
    """

    __slots__ = ()

    def acquire_token(
        self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None
    ) -> Optional[int]:
        """:meth:`acquire`, returning the fencing token once acquired and ``None`` when the wait
        limit passed."""
        return self._acquire(blocking, timeout, lease, "lock.acquire_token()")

    def acquire_token_async(
        self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None
    ) -> Awaitable[Optional[int]]:
        """:meth:`acquire_token` for asyncio (the calling task is the holder, also when another
        task awaits it: ``asyncio.wait_for`` before 3.12, ``asyncio.gather``)."""
        return self._acquire_async(blocking, timeout, lease)

    def _entered(self, token: int) -> int:
        return token

    def acquired(  # type: ignore[override]
        self, timeout: Timeout = -1, *, lease: Optional[float] = None
    ) -> _Acquired[int]:
        """As for every lock, but ``with lock.acquired(timeout=...) as token:`` binds the token."""
        return _Acquired(self, _wait_limit(True, timeout, self.name), _lease(lease, self.name))

    def __enter__(self) -> int:  # type: ignore[override]
        token = self._acquire(True, -1, None, "`with lock:`")
        assert token is not None  # an unlimited wait either acquires or raises
        return token

    async def __aenter__(self) -> int:  # type: ignore[override]
        token = await self._acquire_async(True, -1, None)
        assert token is not None
        return token
