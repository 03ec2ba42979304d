"""The reentrant distributed :class:`Lock`, Redisson's ``RLock`` twin."""

from __future__ import annotations

from ._lockable import _Lockable

__all__ = ["Lock"]


class Lock(_Lockable):
    """A reentrant lock shared by every process (Python, Node, Rust, Java on Redisson) that uses
    the same name on the same Redis.

    Get one with :meth:`crosslock.Client.lock`. It is stored exactly as Redisson's ``RLock``: a
    hash at the lock's name holding ``<client-uuid>:<n>`` → hold count, with the lease as TTL; a
    release publishes ``0`` on ``redisson_lock__channel:{name}``.

    Each thread, and each asyncio task, is its own holder and may re-enter; everything else about
    holding it (lease, watchdog, the lost signal) is described on the base class.

    Example::

        lock = client.lock("orders:42")
        with lock:                          # waits as long as it takes
            ...
        if lock.acquire(timeout=2.0, lease=10.0):
            try:
                ...
            finally:
                lock.release()

        async with lock:                    # this task is the holder
            ...
    """

    __slots__ = ()
