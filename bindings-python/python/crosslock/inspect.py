"""The shapes :meth:`crosslock.Client.inspect` and :meth:`crosslock.Client.watch` return: plain
dicts (typed here), ready to print or serialize as JSON, and the :class:`Watch` iterator."""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator, List, Optional, TypedDict

__all__ = ["Inspection", "HolderInfo", "ProcessInfo", "QueuedWaiter", "PermitInfo", "Watch", "WatchEvent"]


class ProcessInfo(TypedDict):
    """The process behind a holder: a crosslock client connected to the node that has the key,
    found by its connection name (``<client_name>-<language>-<pid>-<id8>``) in ``CLIENT LIST``."""

    language: str
    """``rs``, ``py`` or ``js``."""
    pid: int
    """Its process id (on its own host)."""
    host: str
    """The host it connects from, as the server sees it."""
    address: str
    """Its connection's ``host:port``, as the server sees it."""
    name: str
    """Its connection name."""


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
    process: Optional[ProcessInfo]
    """The process behind it, when it is a crosslock client that can be found (``None`` for a
    Redisson holder, a client gone, or a server that refuses ``CLIENT LIST``)."""


class QueuedWaiter(TypedDict):
    """A waiter queued on a fair lock."""

    holder: str
    deadline: Optional[float]
    """Epoch seconds past which it is skipped as dead unless it tries again."""
    process: Optional[ProcessInfo]
    """The process behind it, as a holder's."""


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
    """``absent``, ``lock``, ``fenced_lock``, ``fair_lock``, ``read_write_lock``, ``semaphore`` or
    ``count_down_latch`` (a number with waiters subscribed as that kind's), ``counter`` (a number
    nobody waits on: a semaphore's permits, a latch's count, or any application's counter),
    ``permit_expirable_semaphore``, or the Redis type of anything else."""
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


class WatchEvent(TypedDict):
    """One change seen by a :class:`Watch`."""

    at: float
    """Epoch seconds when the change was seen."""
    event: str
    """What changed: ``acquired``, ``reentered``, ``exited`` (one of several holds given back),
    ``released``, ``force-unlocked``, ``expired``, ``removed`` (gone without a message before its
    lease ran out: a non-reentrant lock's release, or a delete), ``queued``, ``dequeued``,
    ``count``, ``mode`` or ``other``."""
    name: str
    holder: Optional[str]
    """The holder (``<client-uuid>:<n>``) or permit id concerned, if any."""
    detail: str
    """The details in words: hold counts, lease, token, queue place, counts before and after."""
    text: str
    """The line ``crosslock watch`` prints: UTC timestamp, event, name, holder, detail."""
    state: Inspection
    """The object after the change, as :meth:`crosslock.Client.inspect` returns it."""


class Watch:
    """A live view of one object: see :meth:`crosslock.Client.watch`.

    Iterate it (``for event in watch``, or ``async for`` under asyncio) to receive each change as a
    :class:`WatchEvent`; it never ends by itself. Close it (or use it as a context manager) to
    drop its subscription connection.

    What a watch can tell apart: a hold gone right after a release message was *released*; a lock
    held several times gone at once with one message was *force-unlocked* (a force-unlock of a lock
    held once looks exactly like its release); a hold gone silently once its lease ran out
    *expired*. Acquires publish nothing, so they are found by the snapshot taken at least every
    ``interval`` seconds.
    """

    __slots__ = ("_native", "name")

    def __init__(self, native: Any, name: str) -> None:
        self._native = native
        self.name = name

    @property
    def initial(self) -> Inspection:
        """The object as it was when the watch started."""
        result: Inspection = self._native.initial
        return result

    def next(self) -> Optional[WatchEvent]:
        """The next change; blocks (GIL released, Ctrl-C honoured) as long as nothing changes.
        ``None`` once the watch is closed (also for a call waiting when another thread closes it).

        Raises :class:`RedisUnavailableError` when no snapshot can be taken; the watch stays
        usable and the next call tries again."""
        event: Optional[WatchEvent] = self._native.next()
        return event

    async def next_async(self) -> Optional[WatchEvent]:
        """:meth:`next` for asyncio. Cancelling it loses no event."""
        event: Optional[WatchEvent] = await self._native.next_async()
        return event

    def close(self) -> None:
        """Closes the watch's subscription connection; a waiting or later :meth:`next` answers
        ``None`` and iteration ends. Idempotent."""
        self._native.close()

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        event = self.next()
        if event is None:
            raise StopIteration
        return event

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        event = await self.next_async()
        if event is None:
            raise StopAsyncIteration
        return event

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Watch":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<crosslock.Watch {self.name!r}>"
