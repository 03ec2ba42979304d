"""crosslock: Redis locks shared with Node, Rust and Java's Redisson, stored exactly as Redisson
stores them.

Example::

    import crosslock

    client = crosslock.connect("redis://127.0.0.1:6379/0")
    lock = client.lock("orders:42")

    with lock:                                  # waits as long as it takes; renewed while held
        ...

    if lock.acquire(timeout=2.0, lease=10.0):   # wait ≤ 2 s; expires after 10 s, no renewal
        try:
            ...
        finally:
            lock.release()

    async with lock:                            # the asyncio task is the holder
        ...

    client.close()

Each thread and each asyncio task is its own holder; blocking waits release the GIL and Ctrl-C
interrupts them, leaving nothing behind in Redis.

Logging: crosslock says nothing by default. It reports reconnects, renewal failures and lost
locks (WARNING and INFO) and subscription changes (DEBUG) on the standard :mod:`logging` logger
``crosslock``; ``logging.basicConfig(level=logging.INFO)`` or a handler on that logger shows them.
No record carries a password.
"""

from __future__ import annotations

import logging as _logging
import os

from . import _identity, _native
from ._identity import Owner
from .client import Client, connect, connect_async
from .client import _reset_clients_after_fork
from .errors import (
    AuthenticationError,
    BlockingInEventLoopError,
    CrosslockError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockLostError,
    LockTimeoutError,
    NonReentrantError,
    NotHeldError,
    RedisError,
    RedisUnavailableError,
    UpgradeRefusedError,
    WrongTypeError,
)
from .count_down_latch import CountDownLatch
from .fair_lock import FairLock, NonReentrantFairLock
from .fenced_lock import FencedLock
from .inspect import HolderInfo, Inspection, PermitInfo, ProcessInfo, QueuedWaiter, Watch, WatchEvent
from ._acquisition import Acquisition
from .lock import Lock
from .multi_lock import MultiLock, RedLock
from .non_reentrant_lock import NonReentrantLock
from .group_lock import GroupLock
from .permit_expirable_semaphore import PermitExpirableSemaphore
from .read_write_lock import ReadLock, ReadWriteLock, WriteLock
from .semaphore import Semaphore
from .spin_lock import Backoff, SpinLock

__version__: str = _native.__version__

# A library stays quiet unless the application configures logging (no "last resort" output).
_logging.getLogger("crosslock").addHandler(_logging.NullHandler())

__all__ = [
    "connect",
    "connect_async",
    "Client",
    "Owner",
    "Acquisition",
    "Lock",
    "FairLock",
    "SpinLock",
    "Backoff",
    "FencedLock",
    "NonReentrantLock",
    "GroupLock",
    "NonReentrantFairLock",
    "ReadWriteLock",
    "ReadLock",
    "WriteLock",
    "MultiLock",
    "RedLock",
    "Semaphore",
    "PermitExpirableSemaphore",
    "CountDownLatch",
    "Inspection",
    "HolderInfo",
    "ProcessInfo",
    "QueuedWaiter",
    "PermitInfo",
    "Watch",
    "WatchEvent",
    "CrosslockError",
    "NotHeldError",
    "LockTimeoutError",
    "LockLostError",
    "RedisUnavailableError",
    "WrongTypeError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "BlockingInEventLoopError",
    "AuthenticationError",
    "NonReentrantError",
    "UpgradeRefusedError",
    "RedisError",
    "__version__",
]


def _after_fork_in_child() -> None:
    # Core rebuilds its runtime, and each client its id and connections, on first use in the child
    # anyway; doing it here makes that eager. Identity caches and internal locks start afresh.
    _native._after_fork()
    _identity._reset_after_fork()
    _reset_clients_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
