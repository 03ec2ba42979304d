"""The :class:`PermitExpirableSemaphore`, Redisson's ``RPermitExpirableSemaphore`` twin: permits
with ids and leases."""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Optional

from . import _native
from ._acquisition import _claimed
from ._args import Timeout, _delta, _lease, _permits, _refuse_in_loop, _seconds, _wait_limit
from ._types import ClientLike
from .errors import InvalidArgumentTypeError

__all__ = ["PermitExpirableSemaphore"]

PermitLostCallback = Callable[["PermitExpirableSemaphore", str], object]
"""``on_lost(semaphore, permit_id)``: called when a permit this client took may be lost."""


class PermitExpirableSemaphore:
    """A semaphore whose permits have ids and leases, shared by every process (Python, Node,
    Rust, Java on Redisson) using the same name on the same Redis.

    Get one with :meth:`crosslock.Client.permit_expirable_semaphore`. Stored exactly as
    Redisson's ``RPermitExpirableSemaphore``: the available count at the name (shared with
    :class:`~crosslock.Semaphore`), each taken permit in the sorted set ``{name}:timeout`` (its 16
    random bytes → its expiry), and the channel ``redisson_sc:{name}``.

    :meth:`acquire` returns the permit's id (32 hex characters); anyone, in any language, may
    release it by that id. **Taken without a lease, a permit is kept by this client's watchdog**
    while this process lives: a crashed holder's permit comes back after the watchdog timeout,
    a live holder's never expires, and if it is lost anyway (released by someone else, Redis out
    of reach past its expiry), :meth:`lost` turns true and ``on_lost(semaphore, permit_id)`` runs.
    Taken with ``lease=`` seconds, it expires after that. (Redisson's permits without a lease never
    expire, so a crashed holder's never come back.)

    Example::

        seats = client.permit_expirable_semaphore("licences")
        seats.try_set_permits(10)
        permit = seats.acquire(timeout=5.0)            # an id, or None after 5 s
        if permit is not None:
            try:
                ...
            finally:
                seats.release(permit)

        with seats.acquired(lease=60) as permit:      # released on exit
            ...
    """

    __slots__ = ("_client", "_native", "_on_lost", "_lost", "_guard", "__weakref__")

    def __init__(self, client: ClientLike, native: _native.PermitExpirableSemaphore, on_lost: Optional[PermitLostCallback]) -> None:
        self._client = client
        self._native = native
        self._on_lost = on_lost
        self._lost: set[str] = set()
        self._guard = threading.Lock()
        client._register_permits(self)

    @property
    def name(self) -> str:
        """The semaphore's name: its key in Redis."""
        return self._native.name

    @property
    def on_lost(self) -> Optional[PermitLostCallback]:
        """Called as ``on_lost(semaphore, permit_id)`` (on a background thread) when a permit this
        client took may be lost."""
        return self._on_lost

    def acquire(self, timeout: Timeout = -1, *, lease: Optional[float] = None, blocking: bool = True) -> Optional[str]:
        """Takes a permit, waiting at most ``timeout`` seconds (``-1`` or ``None``: as long as it
        takes; ``blocking=False``: one try): its id, or ``None`` when the wait limit passed with Redis answering
        (:class:`~crosslock.RedisUnavailableError` with Redis out of reach;
        :class:`~crosslock.BlockingInEventLoopError` for a blocking call inside a running asyncio
        loop: use :meth:`acquire_async`). ``lease``: seconds until it expires; ``None`` keeps it
        with the watchdog."""
        wait, lease_s = _wait_limit(blocking, timeout, self.name), _lease(lease, self.name)
        _refuse_in_loop(wait, self.name, "semaphore.acquire()", "`await semaphore.acquire_async()`")
        return self._native.acquire(wait, lease_s)

    async def acquire_async(
        self, timeout: Timeout = -1, *, lease: Optional[float] = None, blocking: bool = True
    ) -> Optional[str]:
        """:meth:`acquire` for asyncio; cancelling it takes nothing."""
        wait, lease_s = _wait_limit(blocking, timeout, self.name), _lease(lease, self.name)
        permit: Optional[str] = await _claimed(self._native.acquire_async(wait, lease_s))
        return permit

    def acquired(self, timeout: Timeout = -1, *, lease: Optional[float] = None) -> _Acquired:
        """A context manager binding a permit's id (or raising
        :class:`~crosslock.LockTimeoutError` after ``timeout``) and releasing it on exit."""
        return _Acquired(self, _wait_limit(True, timeout, self.name), _lease(lease, self.name))

    def release(self, permit_id: str) -> None:
        """Releases permit ``permit_id`` (anyone may). Raises :class:`~crosslock.NotHeldError`
        when there is no such permit (already released, or expired and counted back) and
        :class:`~crosslock.LockLostError` when it had expired (it is counted back all the same)."""
        self._native.release(self._id(permit_id))
        self._forget(permit_id)

    async def release_async(self, permit_id: str) -> None:
        """:meth:`release` for asyncio."""
        await self._native.release_async(self._id(permit_id))
        self._forget(permit_id)

    def try_release(self, permit_id: str) -> bool:
        """Releases permit ``permit_id``; ``True`` when it was taken and unexpired."""
        released = self._native.try_release(self._id(permit_id))
        self._forget(permit_id)
        return released

    async def try_release_async(self, permit_id: str) -> bool:
        """:meth:`try_release` for asyncio."""
        released = await self._native.try_release_async(self._id(permit_id))
        self._forget(permit_id)
        return released

    def update_lease(self, permit_id: str, lease: float) -> bool:
        """Makes permit ``permit_id`` expire ``lease`` seconds from now; ``False`` if there is no
        such permit."""
        return self._native.update_lease(self._id(permit_id), _seconds(lease, "lease", self.name))

    async def update_lease_async(self, permit_id: str, lease: float) -> bool:
        """:meth:`update_lease` for asyncio."""
        return await self._native.update_lease_async(self._id(permit_id), _seconds(lease, "lease", self.name))

    def remaining_lease(self, permit_id: str) -> Optional[float]:
        """Seconds before permit ``permit_id`` expires: ``None`` if there is no such permit,
        ``math.inf`` if it never does."""
        return self._native.remaining_lease(self._id(permit_id))

    async def remaining_lease_async(self, permit_id: str) -> Optional[float]:
        """:meth:`remaining_lease` for asyncio."""
        return await self._native.remaining_lease_async(self._id(permit_id))

    def lost(self, permit_id: str) -> bool:
        """Whether this client's permit ``permit_id`` may be lost (see the class docs). Decided
        from the clock on each read, as :attr:`Lock.lost <crosslock.Lock.lost>` is: true at once
        once the permit's last confirmed lease has run out, even right after a pause."""
        with self._guard:
            if permit_id in self._lost:
                return True
        if self._native.is_lost(self._id(permit_id)):
            self._mark_lost(permit_id)
            return True
        return False

    def try_set_permits(self, permits: int) -> bool:
        """Sets the number of permits unless it is set already; ``True`` if it set them."""
        return self._native.try_set_permits(_permits(permits, self.name, 0))

    async def try_set_permits_async(self, permits: int) -> bool:
        """:meth:`try_set_permits` for asyncio."""
        return await self._native.try_set_permits_async(_permits(permits, self.name, 0))

    def add_permits(self, permits: int) -> int:
        """Adds ``permits`` (negative: removes) to what is available; returns the new count."""
        return self._native.add_permits(_delta(permits, self.name))

    async def add_permits_async(self, permits: int) -> int:
        """:meth:`add_permits` for asyncio."""
        return await self._native.add_permits_async(_delta(permits, self.name))

    def available_permits(self) -> int:
        """How many permits are available now (expired ones counted back first)."""
        return self._native.available_permits()

    async def available_permits_async(self) -> int:
        """:meth:`available_permits` for asyncio."""
        return await self._native.available_permits_async()

    def __repr__(self) -> str:
        return f"<crosslock.PermitExpirableSemaphore {self.name!r}>"

    # -- internals ---------------------------------------------------------------------------

    def _id(self, permit_id: object) -> str:
        if not isinstance(permit_id, str):
            raise InvalidArgumentTypeError(
                f"a permit id of semaphore {self.name!r} is a str of 32 hex characters, got {type(permit_id).__name__}",
                lock_name=self.name,
            )
        return permit_id

    def _mark_lost(self, permit_id: str) -> None:
        with self._guard:
            self._lost.add(permit_id)

    def _forget(self, permit_id: str) -> None:
        with self._guard:
            self._lost.discard(permit_id)

    def _reset_after_fork(self) -> None:
        self._guard = threading.Lock()
        self._lost = set()


class _Acquired:
    __slots__ = ("_sem", "_wait", "_lease", "_ids")

    def __init__(self, sem: PermitExpirableSemaphore, wait: Optional[float], lease: Optional[float]) -> None:
        self._sem, self._wait, self._lease = sem, wait, lease
        self._ids: list[str] = []

    def __enter__(self) -> str:
        _refuse_in_loop(self._wait, self._sem.name, "`with semaphore.acquired(...):`", "`async with semaphore.acquired(...):`")
        permit = self._sem._native.acquire(self._wait, self._lease, True)
        assert permit is not None  # raise_timeout raises instead
        self._ids.append(permit)
        return permit

    def __exit__(self, *exc_info: object) -> None:
        self._sem.release(self._ids.pop())

    async def __aenter__(self) -> str:
        permit: Optional[str] = await _claimed(self._sem._native.acquire_async(self._wait, self._lease, True))
        assert permit is not None
        self._ids.append(permit)
        return permit

    async def __aexit__(self, *exc_info: object) -> None:
        await self._sem.release_async(self._ids.pop())

    def __iter__(self) -> Iterator[str]:  # pragma: no cover - not a sequence
        raise TypeError("use `with sem.acquired(...) as permit_id:`")
