"""The :class:`NonReentrantLock`, Redisson's non-reentrant lock twin."""

from __future__ import annotations

from ._lockable import _Lockable

__all__ = ["NonReentrantLock"]


class NonReentrantLock(_Lockable):
    """A lock its holder cannot re-enter: a second acquire by the same thread or asyncio task
    raises :class:`~crosslock.NonReentrantError` at once, naming the lock, instead of waiting for
    itself forever (as ``threading.Lock`` would).

    Get one with :meth:`crosslock.Client.non_reentrant_lock`. Stored exactly as Redisson's
    non-reentrant lock (the ``RLock`` hash and channel), so it excludes :class:`~crosslock.Lock`
    holders of the same name. Pick it when re-entering would be a bug you want to hear about.

    Example::

        lock = client.non_reentrant_lock("payments:7")
        with lock:
            lock.acquire()      # NonReentrantError: release it first
    """

    __slots__ = ()
