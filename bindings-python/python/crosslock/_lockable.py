"""What every lock of the RLock family does in Python: :class:`_Lockable`, the base of
:class:`~crosslock.Lock`, :class:`~crosslock.FairLock`, :class:`~crosslock.SpinLock`,
:class:`~crosslock.FencedLock`, :class:`~crosslock.NonReentrantLock`,
:class:`~crosslock.NonReentrantFairLock` and the read and write locks
of a :class:`~crosslock.ReadWriteLock`.

One native class (``crosslock._native.Lock``) serves every kind; each public class is a short
subclass with its own documentation and its own extras. Identity (which thread or asyncio task
holds), the context managers, ``threading.Lock``'s ``blocking``/``timeout`` meaning, the lost flag
and callback, and the claim of an asyncio acquire that raced a cancellation are all here, once.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generic, Hashable, Optional, TypeVar

from . import _native
from ._identity import current_owner
from ._routes import lock_route
from .errors import InvalidArgumentError, InvalidArgumentTypeError, LockLostError

if TYPE_CHECKING:
    from .client import Client

__all__: list[str] = []

LostCallback = Callable[[Any], Any]
_Entered = TypeVar("_Entered")
_Self = TypeVar("_Self", bound="_Lockable")


def _seconds(value: object, what: str, lock_name: Optional[str] = None) -> float:
    """``value`` as float seconds; the type and float range are checked here, the rest by core."""
    where = f" of lock {lock_name!r}" if lock_name is not None else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentTypeError(
            f"the {what}{where} must be a number of seconds, got {type(value).__name__} {value!r}",
            lock_name=lock_name,
        )
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(
            f"the {what}{where} is too large to be a number of seconds (an int of "
            f"{len(str(abs(int(value))))} digits); the longest is 2**53-1 ms, about 285,000 years",
            lock_name=lock_name,
        ) from None


def _wait_limit(blocking: bool, timeout: object, lock_name: str) -> Optional[float]:
    """``threading.Lock.acquire``'s ``blocking``/``timeout`` as core's wait limit: ``None`` waits
    without limit, ``0.0`` tries once."""
    seconds = _seconds(timeout, "timeout", lock_name)
    if not blocking:
        if seconds != -1:
            raise InvalidArgumentError(
                f"can't specify a timeout for a non-blocking call (lock {lock_name!r}): pass "
                "either blocking=False or a timeout",
                lock_name=lock_name,
            )
        return 0.0
    if seconds == -1:
        return None
    return seconds  # core rejects negative, NaN and infinite values with a clear message


def _lease(lease: object, lock_name: str) -> Optional[float]:
    return None if lease is None else _seconds(lease, "lease", lock_name)


def _abandon_if_won(pending: "asyncio.Future[Any]") -> None:
    """The awaiting task was cancelled: give back what the native acquire won, if it did."""
    if pending.done() and not pending.cancelled() and pending.exception() is None:
        pending.result().abandon()


async def _claimed(pending: "asyncio.Future[_native.PendingHold]") -> Any:
    """Awaits a native acquire and claims what it won (see :func:`_acquired_async`)."""
    try:
        outcome = await pending
    except BaseException:
        _abandon_if_won(pending)
        raise
    return outcome.claim()


async def _acquired_async(
    lock: "_Lockable", wait: Optional[float], lease: Optional[float], raise_timeout: bool
) -> Optional[int]:
    """Acquires ``lock`` for the calling task: awaits the native acquire and claims the hold it won
    (``None`` when not acquired, else the token, 0 without).

    The native awaitable resolves to a ``PendingHold`` that gives its hold back unless claimed, so
    a cancellation that races the acquire's success leaves no hold behind: if the future was
    cancelled first, the native side drops (and so gives back) the hold; if the result was already
    set but asyncio throws ``CancelledError`` into this task instead (``task.cancel()`` came before
    the task resumed), it is abandoned here. (The native future resumes the task in the turn that
    sets its result, so that moment does not come today; this keeps it safe if it ever does.) One coroutine between the caller and the native
    future: every level of ``await`` is paid again on each resumption.
    """
    owner = current_owner()
    pending = lock._native.acquire_async(owner, wait, lease, raise_timeout)
    try:
        outcome = await pending
    except BaseException:
        _abandon_if_won(pending)
        raise
    token: Optional[int] = outcome.claim()
    if token is not None:
        lock._forget_lost(owner)
    return token


class _Lockable:
    """The lock-family behaviour every public lock class inherits (see the module docs); each
    subclass documents its kind.

    **Who holds it.** Each thread, and each asyncio task, is its own holder: another thread or
    task waits; the same one re-enters (unless the kind does not re-enter). One object can be
    shared by all threads and tasks.

    **Lease.** Acquired without ``lease``, the lock is kept by the watchdog (30 s, renewed every
    10 s while this process lives); with ``lease=`` seconds it simply expires after that.

    **Lost lock.** If the lock may be lost — a renewal finds it gone (a force-unlock, an expiry)
    or no renewal was confirmed before its last confirmed lease ran out (Redis out of reach, a
    partition, a paused process), or an explicit lease ran out while it was held — :attr:`lost`
    becomes true, the ``on_lost`` callback runs (on a background thread) and ``release()`` raises
    :class:`~crosslock.LockLostError`. It is told at the latest when another client could take
    the lock, whether or not Redis can be reached; :attr:`lost` reads the clock itself, so it is
    true from the deadline on even in a process that was paused past it.
    """

    __slots__ = ("_client", "_native", "_on_lost", "__weakref__")

    def __init__(self, client: Client, native: _native.Lock, on_lost: Optional[LostCallback]) -> None:
        self._client = client  # keeps the client (and its lost-lock dispatch) alive
        self._native = native
        self._on_lost = on_lost
        client._register(self)

    @property
    def name(self) -> str:
        """The lock's name: its key in Redis."""
        return self._native.name

    @property
    def client(self) -> Client:
        """The client this lock belongs to."""
        return self._client

    @property
    def on_lost(self) -> Optional[LostCallback]:
        """The callback run (with this lock, on a background thread) when a hold of it is lost."""
        return self._on_lost

    # -- acquire ----------------------------------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: float = -1, *, lease: Optional[float] = None) -> bool:
        """Acquires the lock for the calling thread (or asyncio task), with the meaning of
        ``threading.Lock.acquire``.

        Args:
            blocking: ``False`` makes a single attempt.
            timeout: seconds to wait at most; ``-1`` (the default) waits as long as it takes.
                Cannot be combined with ``blocking=False``.
            lease: seconds after which the lock expires by itself, with no renewal; ``None``
                (the default) keeps it renewed by the watchdog while this process holds it.

        Returns:
            ``True`` once acquired, ``False`` if the wait limit passed (or the single try failed)
            with Redis answering that the lock is held: ``False`` always means busy.

        Raises:
            InvalidArgumentError: a negative, NaN or non-numeric ``timeout`` or ``lease``, a zero
                lease, or a timeout with ``blocking=False``.
            WrongTypeError: the lock's key holds other data.
            RedisUnavailableError: Redis cannot be reached (no attempt got an answer before the
                wait limit, Redis stopped answering at the end, or an outage outlasted the connect
                timeout; a single try is bounded by the response timeout), or the client is closed.
            KeyboardInterrupt: Ctrl-C while waiting; nothing is left behind in Redis.

        The wait releases the GIL. Example::

            if lock.acquire(timeout=0.5):
                try:
                    ...
                finally:
                    lock.release()
        """
        return self._acquire(blocking, timeout, lease) is not None

    async def acquire_async(
        self, blocking: bool = True, timeout: float = -1, *, lease: Optional[float] = None
    ) -> bool:
        """:meth:`acquire` for asyncio: the calling task is the holder. Cancelling it
        (``task.cancel()``, ``asyncio.timeout``) leaves nothing behind, even when the cancel
        races the acquire's success: a hold that never reached the caller is given back (in the
        background, within a round trip to Redis).

        Example::

            if await lock.acquire_async(timeout=2.0):
                try:
                    ...
                finally:
                    await lock.release_async()
        """
        wait = _wait_limit(blocking, timeout, self.name)
        return await _acquired_async(self, wait, _lease(lease, self.name), False) is not None

    def _acquire(self, blocking: bool, timeout: float, lease: Optional[float]) -> Optional[int]:
        """One acquire by the caller: ``None`` when not acquired, else the token (0 without)."""
        wait = _wait_limit(blocking, timeout, self.name)
        owner = current_owner()
        token = self._native.acquire(owner, wait, _lease(lease, self.name))
        if token is not None:
            self._forget_lost(owner)
        return token

    def _acquire_async(self, blocking: bool, timeout: float, lease: Optional[float]) -> Awaitable[Optional[int]]:
        """:meth:`_acquire` for asyncio: an awaitable (the arguments are checked at once)."""
        wait = _wait_limit(blocking, timeout, self.name)
        return _acquired_async(self, wait, _lease(lease, self.name), False)

    def _entered(self, token: int) -> Any:
        """What ``with`` binds after an acquire that got ``token`` (the lock; a fenced lock's token)."""
        return self

    def acquired(self: _Self, timeout: float = -1, *, lease: Optional[float] = None) -> _Acquired[_Self]:
        """A context manager (``with`` and ``async with``) that acquires within ``timeout``
        seconds or raises :class:`~crosslock.LockTimeoutError` (busy: Redis answered; with Redis
        out of reach it raises :class:`~crosslock.RedisUnavailableError`), and releases on exit.

        Example::

            try:
                with lock.acquired(timeout=2.0, lease=30.0):
                    ...
            except crosslock.LockTimeoutError as e:
                print("busy:", e)      # names the lock and who holds it
        """
        return _Acquired(self, _wait_limit(True, timeout, self.name), _lease(lease, self.name))

    # -- release ----------------------------------------------------------------------------

    def release(self) -> None:
        """Releases one hold of the calling thread (or task); the lock is free once every
        re-entrant hold is released, and then the next waiter anywhere is woken.

        Raises:
            NotHeldError: the caller does not hold the lock (Redis is unchanged). Also a
                ``RuntimeError``, like ``threading.Lock.release``.
            LockLostError: the caller held it but it was lost meanwhile (see :attr:`lost`),
                also when its last confirmed lease ran out while this process was paused, even
                if the lock is still its own in Redis: :attr:`lost` is true from then on, and
                ``on_lost`` has been scheduled by the time this is raised. A hold already known
                lost raises at once, without waiting for Redis (the release still runs in the
                background, as a clean-up).
        """
        owner = current_owner()
        try:
            self._native.release(owner)
        except LockLostError:
            self._client._note_lost(self._route, owner)
            raise

    async def release_async(self) -> None:
        """:meth:`release` for asyncio (the calling task's hold)."""
        owner = current_owner()
        try:
            await self._native.release_async(owner)
        except LockLostError:
            self._client._note_lost(self._route, owner)
            raise

    def force_unlock(self) -> bool:
        """Deletes the lock whoever holds it and wakes a waiter; ``True`` if it was locked. The
        former holder's watchdog then reports the lock lost."""
        return self._native.force_unlock()

    async def force_unlock_async(self) -> bool:
        """:meth:`force_unlock` for asyncio."""
        return await self._native.force_unlock_async()

    # -- queries ----------------------------------------------------------------------------

    def locked(self) -> bool:
        """Whether anyone (any process, any language) holds the lock."""
        return self._native.is_locked()

    async def locked_async(self) -> bool:
        """:meth:`locked` for asyncio."""
        return await self._native.is_locked_async()

    def is_held(self) -> bool:
        """Whether the calling thread (or task) of this client holds the lock."""
        return self._native.is_held_by(current_owner())

    async def is_held_async(self) -> bool:
        """:meth:`is_held` for asyncio (the calling task)."""
        return await self._native.is_held_by_async(current_owner())

    def hold_count(self) -> int:
        """How many times the calling thread (or task) holds the lock; 0 if it does not."""
        return self._native.hold_count_of(current_owner())

    async def hold_count_async(self) -> int:
        """:meth:`hold_count` for asyncio (the calling task)."""
        return await self._native.hold_count_of_async(current_owner())

    def remaining_lease(self) -> Optional[float]:
        """Seconds before the lock expires: ``None`` when it is not locked, ``math.inf`` when its
        key has no expiry."""
        return self._native.remaining_lease()

    async def remaining_lease_async(self) -> Optional[float]:
        """:meth:`remaining_lease` for asyncio."""
        return await self._native.remaining_lease_async()

    def holders(self) -> list[str]:
        """The holder strings (``<client-uuid>:<n>``, ``…:write`` for a writer) holding it now."""
        return self._native.holders()

    async def holders_async(self) -> list[str]:
        """:meth:`holders` for asyncio."""
        return await self._native.holders_async()

    @property
    def lost(self) -> bool:
        """``True`` once the calling thread's (or task's) hold may be lost (see the class docs);
        stays true until it acquires the lock again. Check it in long critical sections.

        Each read decides from this process's monotonic clock, with no round trip: once the last
        confirmed lease's deadline has passed it is true at once, even on the first statement
        after the process resumes from a pause (a GC pause, a stopped VM), before the watchdog
        has run; ``on_lost`` is then scheduled (once)."""
        owner = current_owner()
        if self._client._lost and self._client._was_lost(self._route, owner):
            return True
        if self._native.is_lost(owner):
            self._client._note_lost(self._route, owner)
            return True
        return False

    # -- scopes -----------------------------------------------------------------------------

    def __enter__(self: _Self) -> _Self:
        self._acquire(True, -1, None)
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        # A LockLostError here is raised on purpose: exclusion broke during the block.
        self.release()

    async def __aenter__(self: _Self) -> _Self:
        await self._acquire_async(True, -1, None)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release_async()

    def __repr__(self) -> str:
        return f"<crosslock.{type(self).__name__} {self.name!r} client={self._client.id!r}>"

    @property
    def _is_write(self) -> bool:
        """Whether its holder strings end in ``:write`` (the lost-event route)."""
        return self._native.kind == "write_lock"

    @property
    def _route(self) -> Hashable:
        """The key of its lost-hold route (see ``_routes.lock_route``)."""
        return lock_route(self.name, self._is_write)

    # -- lost-lock bookkeeping (called by Client) --------------------------------------------

    def _forget_lost(self, owner: int) -> None:
        """Acquired by ``owner``: its hold of this lock (through any object) is no longer lost."""
        client = self._client
        if client._lost:  # almost always empty: nothing to take or look up
            client._forget_lost(self._route, owner)


class _Acquired(Generic[_Entered]):
    """What ``acquired()`` returns: acquires or raises ``LockTimeoutError``, releases on exit;
    usable with ``with`` and ``async with``; binds what ``with lock:`` binds (the lock, or a fenced
    lock's token)."""

    __slots__ = ("_lock", "_wait", "_lease")

    def __init__(self, lock: _Lockable, wait: Optional[float], lease: Optional[float]) -> None:
        self._lock, self._wait, self._lease = lock, wait, lease

    def __enter__(self) -> _Entered:
        owner = current_owner()
        token = self._lock._native.acquire(owner, self._wait, self._lease, True)
        self._lock._forget_lost(owner)
        entered: _Entered = self._lock._entered(token or 0)
        return entered

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    async def __aenter__(self) -> _Entered:
        token = await _acquired_async(self._lock, self._wait, self._lease, True)
        entered: _Entered = self._lock._entered(token or 0)
        return entered

    async def __aexit__(self, *exc_info: object) -> None:
        await self._lock.release_async()
