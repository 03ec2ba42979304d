"""The first-come first-served :class:`FairLock`, Redisson's ``RFairLock`` twin, and its
non-reentrant variant :class:`NonReentrantFairLock`."""

from __future__ import annotations

from ._lockable import _Lockable

__all__ = ["FairLock", "NonReentrantFairLock"]


class FairLock(_Lockable):
    """A reentrant lock handed over in the order its waiters asked, across processes and
    languages (Python, Node, Rust, Java on Redisson).

    Get one with :meth:`crosslock.Client.fair_lock`. Stored exactly as Redisson's ``RFairLock``:
    the ``RLock`` hash at the name, a FIFO list of waiters at ``redisson_lock_queue:{name}``, their
    deadlines at ``redisson_lock_timeout:{name}``, and a channel per waiter on which a release
    wakes only the head of the queue (no thundering herd).

    A waiter that gives up (its timeout passed, its task was cancelled, Ctrl-C) leaves the queue at
    once; one that crashes is skipped once its deadline passes (the client's
    ``fair_lock_wait_timeout``, 5 minutes by default, or the waiter's own timeout). Unlike
    Redisson's, a live crosslock waiter keeps its place however long it waits.

    Example::

        lock = client.fair_lock("printer")
        with lock:          # served in the order of asking
            ...
    """

    __slots__ = ()


class NonReentrantFairLock(_Lockable):
    """A :class:`FairLock` its holder cannot re-enter (Redisson 4.4's non-reentrant fair lock,
    ``getNonReentrantFairLock``): a second acquire by the same thread or asyncio task raises
    :class:`~crosslock.NonReentrantError` at once, naming the lock, as a
    :class:`~crosslock.NonReentrantLock` does.

    Get one with :meth:`crosslock.Client.non_reentrant_fair_lock`. Stored exactly as a
    :class:`FairLock` (the same hash, queue, deadlines and per-waiter channels), so it queues in
    one line with :class:`FairLock` waiters of the same name, in any language and in Redisson.

    Example::

        lock = client.non_reentrant_fair_lock("printer")
        with lock:          # served in the order of asking
            lock.acquire()  # NonReentrantError: release it first
    """

    __slots__ = ()
