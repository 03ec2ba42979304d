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
import functools
import inspect
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Generic, Hashable, Optional, TypeVar, Union

from . import _identity, _native
from ._acquisition import Acquisition, _abandon_if_won
from ._args import Timeout, _lease, _refuse_in_loop, _seconds, _wait_limit
from ._identity import current_owner
from ._routes import lock_route
from .errors import (
    InvalidArgumentTypeError,
    LockLostError,
    NotHeldError,
)

# The kind names this module routes on, from core's table (a KeyError here: the table changed).
_WRITE_LOCK = _native.KINDS["WriteLock"]

if TYPE_CHECKING:
    from .client import Client

__all__: list[str] = []

LostCallback = Callable[[Any], object]
"""``on_lost(lock)``: called with the lock object whose hold may be lost; its result is ignored."""

_log = logging.getLogger("crosslock")

_Entered = TypeVar("_Entered")
_Self = TypeVar("_Self", bound="_Lockable")
_Func = TypeVar("_Func", bound=Callable[..., Any])


def _synchronized(scope: Any, func: _Func) -> _Func:
    """``func`` run inside ``scope`` (a lock, or what ``acquired()`` returns): ``async with`` for a
    coroutine function, ``with`` otherwise; each call is its own acquire by the calling thread or
    task, released when the call returns or raises."""
    if not callable(func):
        raise InvalidArgumentTypeError(
            f"a lock used as a decorator wraps a function, got {type(func).__name__} {func!r}"
        )
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            async with scope:
                return await func(*args, **kwargs)

        return run_async  # type: ignore[return-value]

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        with scope:
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


def _acquired_async(
    lock: "_Lockable", wait: Optional[float], lease: Optional[float], raise_timeout: bool
) -> Coroutine[Any, Any, Optional[int]]:
    """Begins an acquire of ``lock`` by the caller: who holds it (the calling task) is decided now,
    where the call is written, not in whatever task comes to await it — before Python 3.12
    ``asyncio.wait_for`` awaits in a task of its own, and ``asyncio.gather`` always does: that task
    would hold the lock, and end (and so give it back) at once. See :func:`_acquired_as`."""
    owner = current_owner()
    return _acquired_as(lock, owner, _identity.holds_of(owner), wait, lease, raise_timeout)


async def _acquired_as(
    lock: "_Lockable",
    owner: int,
    holds: Optional["_identity._Holds"],
    wait: Optional[float],
    lease: Optional[float],
    raise_timeout: bool,
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
    pending = lock._native.acquire_async(owner, wait, lease, raise_timeout)
    try:
        outcome = await pending
    except BaseException:
        _abandon_if_won(pending)
        raise
    token: Optional[int] = outcome.claim()
    if token is not None:
        lock._acquired_by(owner, lease, holds)
    return token


async def _is_some(acquiring: Awaitable[Optional[int]]) -> bool:
    return await acquiring is not None


class _Lockable:
    """The lock-family behaviour every public lock class inherits (see the module docs); each
    subclass documents its kind.

    **Who holds it.** Each thread, and each asyncio task, is its own holder: another thread or
    task waits; the same one re-enters (unless the kind does not re-enter). One object can be
    shared by all threads and tasks.

    **Lease.** Acquired without ``lease``, the lock is kept by the watchdog (30 s, renewed every
    10 s while this process lives); with ``lease=`` seconds it simply expires after that.

    **asyncio.** In a coroutine use the async forms (``async with lock:``,
    ``await lock.acquire_async()``): a blocking sync call on a thread whose event loop is running
    raises :class:`~crosslock.BlockingInEventLoopError` before sending anything (a single try,
    ``blocking=False`` or ``timeout=0``, is allowed).

    **Ended holders.** A thread (other than the main thread) or asyncio task that ends while
    holding a lock it took as itself (not in an :class:`~crosslock.Owner` scope) is noticed: a
    WARNING on the ``crosslock`` logger names the lock, the holder and the ``file:line`` of the
    acquire; a watchdog-kept hold is then released, one with a lease left to expire.

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

    def acquire(self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None) -> Acquisition:
        """Acquires the lock for the calling thread (or asyncio task), with the meaning of
        ``threading.Lock.acquire``.

        Args:
            blocking: ``False`` makes a single attempt. Must be a ``bool``:
                ``acquire(1.5)`` is refused ("did you mean timeout=1.5?").
            timeout: seconds to wait at most; ``-1`` (the default) or ``None`` waits as long as
                it takes. Cannot be combined with ``blocking=False``.
            lease: seconds after which the lock expires by itself, with no renewal; ``None``
                (the default) keeps it renewed by the watchdog while this process holds it.

        Returns:
            An :class:`Acquisition`: true once acquired, false if the wait limit passed (or the
            single try failed) with Redis answering that the lock is held (false always means
            busy). It compares ``== True``/``== False`` as a ``bool`` and, used as
            ``with lock.acquire(...):``, releases on exit.

        Raises:
            BlockingInEventLoopError: a blocking call (anything but ``blocking=False`` or
                ``timeout=0``) on a thread whose asyncio event loop is running; use
                ``await lock.acquire_async()`` / ``async with lock:`` there. Nothing was sent.
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
        token = self._acquire(blocking, timeout, lease, "lock.acquire()")
        if token is None:
            return Acquisition(False, _nothing, self.name)
        return Acquisition(True, self._release_one(current_owner()), self.name)

    def _release_one(self, owner: int) -> Callable[[], None]:
        """Releases one hold of ``owner`` (what an :class:`Acquisition` undoes on ``with`` exit)."""

        def release() -> None:
            if owner == current_owner():
                self.release()
            else:  # pragma: no cover - left in another thread or task
                self._native.release(owner)

        return release

    def acquire_async(
        self, blocking: bool = True, timeout: Timeout = -1, *, lease: Optional[float] = None
    ) -> Coroutine[Any, Any, bool]:
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
        # The holder is the task that calls, also when another task awaits (asyncio.wait_for
        # before 3.12, asyncio.gather): the arguments are checked, and the holder decided, here.
        return _is_some(_acquired_async(self, wait, _lease(lease, self.name), False))

    def _acquire(self, blocking: object, timeout: object, lease: Optional[float], form: str) -> Optional[int]:
        """One acquire by the caller: ``None`` when not acquired, else the token (0 without).
        ``form`` is how the caller spelt it, for the event-loop refusal."""
        wait = _wait_limit(blocking, timeout, self.name)
        lease_s = _lease(lease, self.name)
        _refuse_in_loop(wait, self.name, form, _ASYNC_FORMS.get(form, "the method's _async form"))
        owner = current_owner()
        token = self._native.acquire(owner, wait, lease_s)
        if token is not None:
            self._acquired_by(owner, lease_s)
        return token

    def _acquired_by(self, owner: int, lease: Optional[float], holds: Any = _identity.CALLER) -> None:
        self._forget_lost(owner)
        _identity.note_acquired(self, owner, lease is None, holds)

    def _acquire_async(self, blocking: object, timeout: object, lease: Optional[float]) -> Awaitable[Optional[int]]:
        """:meth:`_acquire` for asyncio: an awaitable (the arguments are checked at once)."""
        wait = _wait_limit(blocking, timeout, self.name)
        return _acquired_async(self, wait, _lease(lease, self.name), False)

    def _entered(self, token: int) -> Any:
        """What ``with`` binds after an acquire that got ``token`` (the lock; a fenced lock's token)."""
        return self

    def acquired(self: _Self, timeout: Timeout = -1, *, lease: Optional[float] = None) -> _Acquired[_Self]:
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
            _identity.note_released(self, owner, True)
            raise
        except NotHeldError:
            _identity.note_released(self, owner, True)
            raise
        _identity.note_released(self, owner)

    def release_async(self) -> Coroutine[Any, Any, None]:
        """:meth:`release` for asyncio (the calling task's hold, also when another task awaits it:
        ``asyncio.wait_for`` before 3.12, ``asyncio.gather``)."""
        owner = current_owner()
        return self._release_as(owner, _identity.holds_of(owner, create=False))

    async def _release_as(self, owner: int, holds: Any) -> None:
        try:
            await self._native.release_async(owner)
        except LockLostError:
            self._client._note_lost(self._route, owner)
            _identity.note_released(self, owner, True, holds)
            raise
        except NotHeldError:
            _identity.note_released(self, owner, True, holds)
            raise
        _identity.note_released(self, owner, False, holds)

    def _release_leaked(self, owner: int, what: str, site: str, renewed: bool) -> None:
        """The thread or task ``owner`` ended holding this lock (see ``_identity``): warn, and
        release every hold it left when the watchdog keeps it (on a helper thread); a hold with a
        lease is left to expire."""
        count = self._native.hold_count_of(owner)
        if count <= 0:
            return  # released meanwhile (through another object of the name, a close, an expiry)
        _log.warning(
            "lock %r was still held (%d time(s), as %s) when its %s ended; it was acquired at %s. "
            "%s: release every hold before a thread or task ends (use `with`/`async with`)",
            self.name,
            count,
            self._client._native.holder(owner),
            what,
            site,
            "Releasing it" if renewed else "Leaving it to expire after its lease",
        )
        if not renewed:
            return
        for _ in range(count):
            try:
                self._native.release(owner)
            except (NotHeldError, LockLostError):
                break

    def lost_event(self) -> asyncio.Event:
        """An :class:`asyncio.Event` of the calling task's loop, set (in that loop) as soon as the
        calling task's hold of this lock may be lost — the awaitable form of ``on_lost``. Call it
        inside the task that holds the lock, after acquiring; it is set at once if the hold is
        already lost. One event per call; drop it when done.

        Example::

            async with lock:
                lost = lock.lost_event()
                work = asyncio.ensure_future(do_work())
                await asyncio.wait([work, asyncio.ensure_future(lost.wait())],
                                   return_when=asyncio.FIRST_COMPLETED)
                if lost.is_set():
                    work.cancel()       # exclusion broke: stop
        """
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        owner = current_owner()
        self._client._add_lost_event(self._route, owner, loop, event)
        if self.lost:
            event.set()
        return event

    # -- extend -----------------------------------------------------------------------------

    def extend(self, lease: float) -> None:
        """Sets the lease of the calling thread's (or task's) hold to ``lease`` seconds from now,
        shorter or longer than what was left: the lock expires then unless extended again or
        released. A hold kept by the watchdog becomes one with that lease (the watchdog stops
        renewing it, every re-entrant hold included), and :attr:`lost` turns true if it is still
        held when the lease runs out. A Redisson client sees the new lease.

        Raises:
            NotHeldError: the caller does not hold the lock (Redis is unchanged).
            LockLostError: the caller held it but the hold is lost (see :attr:`lost`): expired or
                force-unlocked. :attr:`lost` is true and ``on_lost`` is scheduled.
            InvalidArgumentError: a lease under 1 ms, negative, NaN or not a number.

        Example::

            with lock.acquired(lease=10.0):
                for batch in work:
                    process(batch)
                    lock.extend(10.0)  # another 10 s from now
        """
        owner = current_owner()
        try:
            self._native.extend(owner, _seconds(lease, "lease", self.name))
        except LockLostError:
            self._client._note_lost(self._route, owner)
            raise

    def extend_async(self, lease: float) -> Coroutine[Any, Any, None]:
        """:meth:`extend` for asyncio (the calling task's hold, also when another task awaits it)."""
        return self._extend_as(current_owner(), _seconds(lease, "lease", self.name))

    async def _extend_as(self, owner: int, lease: float) -> None:
        try:
            await self._native.extend_async(owner, lease)
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

    def is_held_async(self) -> Awaitable[bool]:
        """:meth:`is_held` for asyncio (the calling task, also when another task awaits it)."""
        return self._native.is_held_by_async(current_owner())

    def hold_count(self) -> int:
        """How many times the calling thread (or task) holds the lock; 0 if it does not."""
        return self._native.hold_count_of(current_owner())

    def hold_count_async(self) -> Awaitable[int]:
        """:meth:`hold_count` for asyncio (the calling task, also when another task awaits it)."""
        return self._native.hold_count_of_async(current_owner())

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
        self._acquire(True, -1, None, "`with lock:`")
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

    def __call__(self, func: _Func) -> _Func:
        """Used as a decorator (``@client.lock("x")``, pottery's ``@synchronize``): every call of
        the decorated function (sync or ``async def``) runs holding the lock, acquired by the
        calling thread or task as ``with lock:`` / ``async with lock:`` would (waiting as long as
        it takes, watchdog lease) and released when the call returns or raises. For a wait limit
        or a lease, decorate with :meth:`acquired` instead, which raises
        :class:`~crosslock.LockTimeoutError` when the lock stays busy.

        Example::

            @client.lock("reports:nightly")
            def nightly_report() -> None:
                ...

            @client.lock("orders").acquired(timeout=2.0, lease=30.0)
            async def place_order(order: Order) -> None:
                ...
        """
        return _synchronized(self, func)

    def __repr__(self) -> str:
        return f"<crosslock.{type(self).__name__} {self.name!r} client={self._client.id!r}>"

    @property
    def _is_write(self) -> bool:
        """Whether its holder strings end in ``:write`` (the lost-event route)."""
        return self._native.kind == _WRITE_LOCK

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
        _refuse_in_loop(self._wait, self._lock.name, "`with lock.acquired(...):`", "`async with lock.acquired(...):`")
        owner = current_owner()
        token = self._lock._native.acquire(owner, self._wait, self._lease, True)
        self._lock._acquired_by(owner, self._lease)
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

    def __call__(self, func: _Func) -> _Func:
        """Used as a decorator: each call of ``func`` (sync or ``async def``) runs inside this
        scope (see :meth:`_Lockable.__call__`)."""
        return _synchronized(self, func)


def _nothing() -> None:
    pass


#: The async form named by the event-loop refusal, by the sync form's spelling.
_ASYNC_FORMS = {
    "lock.acquire()": "`await lock.acquire_async()`",
    "`with lock:`": "`async with lock:`",
    "lock.acquire_token()": "`await lock.acquire_token_async()`",
}
