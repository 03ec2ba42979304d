"""The :class:`ReadWriteLock` (Redisson's ``RReadWriteLock`` twin) and its :class:`ReadLock` and
:class:`WriteLock`."""

from __future__ import annotations

from ._lockable import _Lockable

__all__ = ["ReadWriteLock", "ReadLock", "WriteLock"]


class ReadLock(_Lockable):
    """The read half of a :class:`ReadWriteLock`: many holders at once (threads, tasks,
    processes, languages), none while a writer holds the write lock — except that writer itself
    (a downgrade). Each read hold keeps its own timeout key in Redis, renewed by the watchdog, as
    Redisson's readers do. A read release wakes one waiter."""

    __slots__ = ()


class WriteLock(_Lockable):
    """The write half of a :class:`ReadWriteLock`: one holder (re-entrant) and no reader but the
    writer itself. A holder of the read lock asking for it gets
    :class:`~crosslock.UpgradeRefusedError` at once; a write release wakes every waiter. Its
    holder strings end in ``:write``."""

    __slots__ = ()


class ReadWriteLock:
    """Many readers or one writer, stored exactly as Redisson's ``RReadWriteLock``.

    Get one with :meth:`crosslock.Client.read_write_lock`. Redis holds one hash at the name:
    ``mode`` → ``read``/``write``, each reader ``<client-uuid>:<n>`` → hold count, the writer
    ``<client-uuid>:<n>:write``; waiters of both kinds share ``redisson_rwlock:{name}``.

    The writer may also take the read lock (a downgrade) and release the write lock first;
    readers waiting elsewhere come in then. A holder of the read lock that asks for the write
    lock (an upgrade) gets :class:`~crosslock.UpgradeRefusedError` at once, never a hang. Never
    give a read-write lock the name of another kind of lock: the layouts differ, and crosslock
    refuses the mix with :class:`~crosslock.WrongTypeError`.

    Example::

        rw = client.read_write_lock("catalog")
        with rw.read_lock():            # many readers at once
            ...
        with rw.write_lock():           # one writer, no readers
            with rw.read_lock():        # the writer may also read
                ...
    """

    __slots__ = ("_read", "_write")

    def __init__(self, read: ReadLock, write: WriteLock) -> None:
        self._read, self._write = read, write

    @property
    def name(self) -> str:
        """The lock's name: its key in Redis."""
        return self._read.name

    def read_lock(self) -> ReadLock:
        """The read lock (the same object every call)."""
        return self._read

    def write_lock(self) -> WriteLock:
        """The write lock (the same object every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<crosslock.ReadWriteLock {self.name!r}>"
