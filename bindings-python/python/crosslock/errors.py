"""The exceptions crosslock raises.

Every error is a :class:`CrosslockError`, and each kind is also the builtin exception a Python
program would expect for it, so existing ``except`` clauses keep working::

    try:
        lock.release()
    except crosslock.NotHeldError as e:     # also a RuntimeError, as threading.Lock raises
        print(e.lock_name, e.holder, e.code)

Each carries:

* ``lock_name`` – the lock concerned (``None`` when none is, e.g. a connect failure);
* ``holder`` – the caller's holder string ``<client-uuid>:<n>`` when known;
* ``code`` – a stable string shared with the Node binding (``"NOT_HELD"``, ``"TIMEOUT"``, …);
* ``waited`` – seconds waited, for timeouts;

and the Redis error behind it, if any, as ``__cause__`` (a :class:`RedisError`). Every class
pickles (for ``multiprocessing`` and ``concurrent.futures``).
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
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
]


class CrosslockError(Exception):
    """Base class of every crosslock error.

    Raised as such (``code == "REDIS"``) for an error Redis reported that fits no other kind;
    ``__cause__`` then has Redis's own message.

    Example::

        try:
            with client.lock("orders:42"):
                ...
        except crosslock.CrosslockError as e:
            log.error("lock %s failed (%s): %s", e.lock_name, e.code, e)
    """

    code: str = "REDIS"

    def __init__(
        self,
        message: str = "",
        *,
        lock_name: Optional[str] = None,
        holder: Optional[str] = None,
        code: Optional[str] = None,
        waited: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.lock_name = lock_name
        self.holder = holder
        if code is not None:
            self.code = code
        self.waited = waited

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        # OSError-based classes (TimeoutError, ConnectionError) have their own __reduce__ that
        # would drop the keyword attributes; keep them all.
        return (
            _rebuild,
            (type(self), self.message, self.lock_name, self.holder, self.code, self.waited),
        )


def _rebuild(
    cls: type[CrosslockError],
    message: str,
    lock_name: Optional[str],
    holder: Optional[str],
    code: Optional[str],
    waited: Optional[float],
) -> CrosslockError:
    return cls(message, lock_name=lock_name, holder=holder, code=code, waited=waited)


class NotHeldError(CrosslockError, RuntimeError):
    """A release by someone who does not hold the lock. Redis was not changed.

    Also a :class:`RuntimeError`, as ``threading.Lock.release()`` raises. The message names the
    lock, the caller (``holder``) and who holds it now.

    Example::

        try:
            lock.release()
        except RuntimeError:          # NotHeldError
            ...
    """

    code = "NOT_HELD"


class LockTimeoutError(CrosslockError, TimeoutError):
    """The wait limit passed before the lock could be acquired (``waited`` says how long).

    Raised by :meth:`crosslock.Lock.acquired`; ``acquire(timeout=...)`` returns ``False``
    instead, like ``threading.Lock``. Either means Redis answered and the lock was busy: a wait
    that ends with Redis out of reach raises :class:`RedisUnavailableError`. Also a
    :class:`TimeoutError`.

    Example::

        try:
            with lock.acquired(timeout=2.0):
                ...
        except TimeoutError as e:     # LockTimeoutError
            print(f"{e.lock_name} busy after {e.waited:.1f}s")
    """

    code = "TIMEOUT"


class LockLostError(CrosslockError):
    """The caller held the lock, but it is gone: it expired (Redis out of reach longer than the
    lease) or someone force-unlocked it, so work done since may have overlapped another holder.

    Raised by ``release()`` (and so on leaving ``with lock:``) after the watchdog found the hold
    gone; :attr:`crosslock.Lock.lost` and the ``on_lost`` callback tell it as soon as it happens.
    """

    code = "LOCK_LOST"


class RedisUnavailableError(CrosslockError, ConnectionError):
    """Redis could not be reached, the connection dropped or a reply did not come in time; also
    any use of a closed client. The message names the address. Also a :class:`ConnectionError`.

    A wait that reaches its limit without Redis having answered any attempt (or with Redis out of
    reach at the end) raises this, never :class:`LockTimeoutError` or ``False``: an outage is not
    a busy lock."""

    code = "UNAVAILABLE"


class WrongTypeError(CrosslockError):
    """The lock's key holds another type of value (a name collision with other data). Nothing was
    modified; pick a lock name no other data uses."""

    code = "WRONG_TYPE"


class InvalidArgumentError(CrosslockError, ValueError):
    """An argument is out of range or malformed: an empty lock name, a negative or NaN timeout or
    lease, a zero lease, a bad URL. Also a :class:`ValueError`.

    Example::

        lock.acquire(timeout=-5)      # InvalidArgumentError: the timeout ... must be ≥ 0
    """

    code = "INVALID_ARGUMENT"


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (a lock name that is not a ``str``, a timeout that is not a
    number). An :class:`InvalidArgumentError` that is also a :class:`TypeError`."""


class BlockingInEventLoopError(InvalidArgumentError, RuntimeError):
    """A blocking sync call (``with lock:``, ``acquire()``, ``acquired()``, a semaphore's
    ``acquire()``, a latch's ``wait()``, a multi-lock's) on a thread whose asyncio event loop is
    running. Waiting there would block the loop and every task on it — a certain deadlock when
    another task of that loop holds what it waits for — so it is refused before anything is sent.
    Use the async form (``async with lock:``, ``await lock.acquire_async()``,
    ``await latch.wait_async()``, …) or ``await asyncio.to_thread(...)``. A single try
    (``blocking=False`` or ``timeout=0``) is allowed: it is bounded by the response timeout.

    An :class:`InvalidArgumentError` (code ``"INVALID_ARGUMENT"``) that is also a
    :class:`RuntimeError`.

    Example::

        async def handler():
            with lock:      # BlockingInEventLoopError: use `async with lock:`
                ...
    """


class AuthenticationError(CrosslockError, PermissionError):
    """Redis refused the credentials: a wrong password or user in the URL, or none where the server
    needs one. Retrying does not help, so it is deliberately *not* a :class:`ConnectionError` (nor
    a :class:`RedisUnavailableError`): a loop that retries while Redis is unavailable stops here.
    Also a :class:`PermissionError`.

    Example::

        try:
            client = crosslock.connect("redis://default:wrong@127.0.0.1:6379/0")
        except crosslock.AuthenticationError as e:
            sys.exit(f"fix the Redis password: {e}")
    """

    code = "AUTH"


class NonReentrantError(CrosslockError, RuntimeError):
    """The caller already holds a :class:`~crosslock.NonReentrantLock` and asked for it again:
    that would wait for itself forever. Nothing changed in Redis. Also a :class:`RuntimeError`.

    Example::

        with lock:
            lock.acquire()      # NonReentrantError: release it first
    """

    code = "NON_REENTRANT"


class UpgradeRefusedError(CrosslockError, RuntimeError):
    """The caller holds the read lock of a :class:`~crosslock.ReadWriteLock` and asked for its
    write lock: an upgrade would wait for itself forever, so it is refused at once (Redisson
    refuses it too, by waiting forever). Release the read lock first. Also a
    :class:`RuntimeError`.

    Example::

        with rw.read_lock():
            rw.write_lock().acquire()   # UpgradeRefusedError
    """

    code = "UPGRADE_REFUSED"


class RedisError(Exception):
    """What Redis or the connection reported, attached as the ``__cause__`` of a
    :class:`CrosslockError` (never raised by itself)."""


def _by_code() -> dict[str, type[CrosslockError]]:
    """Every error class by its code: the one table the native module maps core's kinds with."""
    table: dict[str, type[CrosslockError]] = {}
    pending: list[type[CrosslockError]] = [CrosslockError]
    while pending:
        cls = pending.pop()
        table.setdefault(cls.code, cls)  # a subclass sharing its parent's code does not replace it
        pending.extend(cls.__subclasses__())
    return table


_BY_CODE = _by_code()
