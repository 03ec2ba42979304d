"""The shapes :meth:`crosslock.Client.inspect` returns: plain dicts (typed here), ready to print
or serialize as JSON."""

from __future__ import annotations

from typing import List, Optional, TypedDict

__all__ = ["Inspection", "HolderInfo", "QueuedWaiter", "PermitInfo"]


class HolderInfo(TypedDict):
    """One holder of a lock."""

    holder: str
    """The holder string as stored: ``<client-uuid>:<n>`` (Redisson: ``<client-uuid>:<thread-id>``)."""
    client_id: str
    """The client part of the holder."""
    holds: int
    """How many times it holds the lock (re-entries)."""
    write: bool
    """Whether this is a read-write lock's write hold (the field ends with ``:write``)."""
    read_leases: List[float]
    """For a reader: the seconds left on each of its read holds."""


class QueuedWaiter(TypedDict):
    """A waiter queued on a fair lock."""

    holder: str
    deadline: Optional[float]
    """Epoch seconds past which it is skipped as dead unless it tries again."""


class PermitInfo(TypedDict):
    """A permit out of a permit-expirable semaphore."""

    id: str
    """32 hex characters, as Redisson shows it."""
    expires: Optional[float]
    """Epoch seconds when it expires; ``None`` for a permit without expiry."""


class Inspection(TypedDict):
    """What lives at a name, as Redis has it: see :meth:`crosslock.Client.inspect`."""

    name: str
    kind: str
    """``absent``, ``lock``, ``fenced_lock``, ``fair_lock``, ``read_write_lock``, ``counter`` (a
    semaphore's permits or a latch's count), ``permit_expirable_semaphore``, or the Redis type of
    anything else."""
    ttl: Optional[float]
    """Seconds the main key has left (a lock's lease); ``None`` without a key or an expiry."""
    holders: List[HolderInfo]
    mode: Optional[str]
    """A read-write lock's mode: ``read`` or ``write``."""
    queue: List[QueuedWaiter]
    """A fair lock's waiters, head first."""
    token: Optional[int]
    """A fenced lock's last token handed out."""
    count: Optional[int]
    """A counter's value."""
    permits: List[PermitInfo]
