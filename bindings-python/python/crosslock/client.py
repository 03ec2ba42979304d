"""The :class:`Client` and :func:`connect`."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from types import TracebackType
from typing import Any, Callable, Hashable, Iterable, Literal, Optional, Union, cast

from . import _native, _telemetry
from ._identity import current_owner
from ._limits import _whole
from ._args import _seconds
from ._lockable import _WRITE_LOCK, _Lockable
from ._routes import Routes, lock_route
from .errors import InvalidArgumentError, InvalidArgumentTypeError
from .fair_lock import FairLock, NonReentrantFairLock
from .inspect import Inspection, Watch
from .fenced_lock import FencedLock
from .lock import Lock
from .non_reentrant_lock import NonReentrantLock
from .group_lock import GroupLock
from .read_write_lock import ReadLock, ReadWriteLock, WriteLock
from .count_down_latch import CountDownLatch
from .permit_expirable_semaphore import PermitExpirableSemaphore, PermitLostCallback
from .semaphore import Semaphore
from .spin_lock import Backoff, SpinLock

# A permit's kind name, from core's table (a KeyError here: the table changed).
_PERMIT = _native.KINDS["Permit"]

__all__ = ["Client", "connect", "connect_async"]

#: Which callers get lanes (see :func:`connect`).
Lanes = Literal["all", "sync", "none"]

# Core's connect defaults (seconds, by keyword): connect()'s signature spells no number of its own.
# Its docstring does, and core/tests/house_rules.rs ties each one written there to core's value.
_DEFAULTS = _native.CONNECT_DEFAULTS

# Every live client, so the fork hook can re-create their internal locks in the child. Added to
# from any thread, so under its own lock (free-threaded CPython has no GIL to serialise the add
# with the fork hook's walk); the collector's removals are the set's own.
_clients: weakref.WeakSet[Client] = weakref.WeakSet()
_clients_guard = threading.Lock()


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        # Only its type: its text may carry a password.
        raise InvalidArgumentTypeError(
            f"the Redis URL must be a str such as 'redis://127.0.0.1:6379/0', got {type(url).__name__}"
        )
    return url


def _options(
    connect_timeout: float,
    response_timeout: float,
    watchdog_timeout: float,
    fair_lock_wait_timeout: float,
    tls_ca_cert: Union[bytes, str, "os.PathLike[str]", None],
    wait_for_replicas: Optional[int],
    replica_wait_timeout: float,
    client_name: Optional[str],
    lanes: Lanes,
) -> tuple[float, float, float, float, Optional[bytes], Optional[int], float, Optional[str], Lanes]:
    if client_name is not None and not isinstance(client_name, str):
        raise InvalidArgumentTypeError(f"client_name must be a str, got {type(client_name).__name__}")
    return (
        _seconds(connect_timeout, "connect_timeout"),
        _seconds(response_timeout, "response_timeout"),
        _seconds(watchdog_timeout, "watchdog_timeout"),
        _seconds(fair_lock_wait_timeout, "fair_lock_wait_timeout"),
        _pem(tls_ca_cert),
        _replicas(wait_for_replicas),
        _seconds(replica_wait_timeout, "replica_wait_timeout"),
        client_name,
        _lanes(lanes),
    )


def _metrics(
    metrics: Any, with_names: object, spans: Any = None, level: object = "acquires",
    spans_with_names: object = False,
) -> dict[str, Any]:
    """The native connect's telemetry arguments for ``connect(metrics=…, metrics_with_names=…,
    spans=…, spans_level=…, spans_with_names=…)``."""
    for flag, value in (("metrics_with_names", with_names), ("spans_with_names", spans_with_names)):
        if not isinstance(value, bool):
            raise InvalidArgumentTypeError(f"{flag} must be a bool, got {type(value).__name__}")
    if level not in _telemetry.SPAN_LEVELS:
        raise InvalidArgumentError(
            f"spans_level must be 'acquires' (acquires and their script calls) or 'all' (releases, "
            f"watchdog rounds and every script call too), got {level!r}"
        )
    arguments: dict[str, Any] = {}
    sink = _telemetry.sink(metrics)
    if sink is not None:
        arguments.update(telemetry=sink, telemetry_names=with_names)
    replay = _telemetry.span_sink(spans)
    if replay is not None:
        arguments["spans"] = (replay, level == "all", spans_with_names)
    return arguments


# The values of connect()'s ``lanes``.
_LANES = ("all", "sync", "none")


def _lanes(value: object) -> Lanes:
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(f"lanes must be one of 'all', 'sync', 'none', got {type(value).__name__}")
    if value not in _LANES:
        raise InvalidArgumentError(f"lanes must be one of 'all', 'sync', 'none', got {value!r}")
    return cast(Lanes, value)


def _replicas(value: object) -> Optional[int]:
    if value is None:
        return None
    return _whole(value, "replicas", "wait_for_replicas (how many replicas must have each acquisition; None not to wait)")


def _check_name(name: object, what: str = "lock") -> str:
    """A lock name: a non-empty ``str`` that UTF-8 can encode (no lone surrogates)."""
    if not isinstance(name, str):
        raise InvalidArgumentTypeError(
            f"a {what} name must be a non-empty str such as 'orders:42', got "
            f"{type(name).__name__} {name!r}"
        )
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(
            f"a {what} name must be valid Unicode text, but {name!r} has a lone surrogate at "
            f"index {e.start}; Redis keys are UTF-8, and such a name cannot be stored as given",
        ) from None
    return name


def _pem(value: Union[bytes, str, "os.PathLike[str]", None]) -> Optional[bytes]:
    """PEM bytes as given, or read from a file path."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (str, os.PathLike)):
        try:
            with open(value, "rb") as f:
                return f.read()
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the TLS CA certificate {value!r}: {e}") from e
    raise InvalidArgumentTypeError(
        f"tls_ca_cert must be PEM bytes or a path to a PEM file, got {type(value).__name__}"
    )


def connect(
    url: str,
    *,
    connect_timeout: float = _DEFAULTS["connect_timeout"],
    response_timeout: float = _DEFAULTS["response_timeout"],
    watchdog_timeout: float = _DEFAULTS["watchdog_timeout"],
    fair_lock_wait_timeout: float = _DEFAULTS["fair_lock_wait_timeout"],
    tls_ca_cert: Union[bytes, str, "os.PathLike[str]", None] = None,
    wait_for_replicas: Optional[int] = None,
    replica_wait_timeout: float = _DEFAULTS["replica_wait_timeout"],
    client_name: Optional[str] = None,
    lanes: Lanes = _native.DEFAULT_LANES,
    metrics: Any = None,
    metrics_with_names: bool = False,
    spans: Any = None,
    spans_level: Literal["acquires", "all"] = "acquires",
    spans_with_names: bool = False,
) -> Client:
    """Connects to Redis and returns a :class:`Client` (one per process is the usual shape).

    Args:
        url: ``redis://[user:password@]host:port/db``, or ``rediss://…`` for TLS; for Sentinel
            ``redis+sentinel://[user:password@]host:port[,host:port…]/<master name>[/db]`` (the
            hosts are the sentinels; ``?sentinel_password=…`` for the sentinels' own password),
            followed through failovers; for Cluster
            ``redis+cluster://[user:password@]host:port[,host:port…]`` (seed nodes;
            ``?sharded_pubsub=auto|on|off``, ``auto`` as Redisson's default).
        connect_timeout: seconds connecting may take (default 5.0).
        response_timeout: seconds one command may take (default 3.0).
        watchdog_timeout: the lease, in seconds, of locks acquired without one; renewed every
            third of it (default 30.0). Keep it equal across every client of a lock (Redisson's
            ``lockWatchdogTimeout``, 30 s by default).
        fair_lock_wait_timeout: seconds a :class:`FairLock` waiter that gave no timeout may take to
            come back before the others skip it as dead (default 300.0). Keep it equal across
            every client of a lock (Redisson's ``fairLockWaitTimeout``, 5 minutes by default).
        tls_ca_cert: for ``rediss://`` servers whose certificate comes from a private CA: the
            CA certificate(s), as PEM bytes or a path to a PEM file (default: the web roots).
        wait_for_replicas: after every acquisition (a lock, a read or write hold, a permit),
            wait until this many replicas of the master have it (Redis ``WAIT``, as Redisson
            does after its lock scripts); default ``None``, no waiting. When fewer acknowledge
            within ``replica_wait_timeout`` the acquisition is given back and the call raises
            :class:`RedisUnavailableError` (nothing is left held). It makes an
            acquisition survive a failover to a replica that had it; renewals and releases are
            not waited for.
        replica_wait_timeout: seconds to wait for those replicas (default 1.0).
        client_name: what this process is called in ``CLIENT LIST``: every connection is named
            ``<client_name>-py-<pid>-<first 8 hex digits of the client id>`` (default
            ``crosslock``), so ``crosslock inspect`` can name the process behind a holder. 1 to
            64 printable ASCII characters without spaces (else :class:`InvalidArgumentError`).
        lanes: which calls may make their round trip on a connection of the caller's own (a
            *lane*) instead of handing it to crosslock's runtime: ``"all"`` (the default: sync
            methods on their thread, and asyncio loops), ``"sync"`` (sync methods only: no
            socket of crosslock's is ever watched by an asyncio loop) or ``"none"`` (every call
            goes through crosslock's runtime, and the client opens no connection beyond its
            usual ones, for a tight ``maxclients``). Lanes open only while calls come in quick
            succession, at most 16 per node. Anything else raises
            :class:`InvalidArgumentError` (a :class:`ValueError`).
        metrics: record this client's waits, holds, losses, wake-ups, watchdog rounds,
            subscriptions and connection changes as OpenTelemetry metrics (docs/api.md lists
            the instruments, their units and attributes): ``True`` for
            OpenTelemetry's global MeterProvider, or a MeterProvider. Default ``None``: nothing
            is measured. Needs the ``opentelemetry-api`` package (``ImportError`` naming it
            otherwise); the events reach the instruments in batches, on a thread of the client's
            own that ``close()`` stops once it has told them all.
        metrics_with_names: add each lock's name as the attribute ``crosslock.lock.name`` (one
            series per name: only where names are few). Default ``False``.
        spans: make OpenTelemetry spans of this client's acquires: a ``crosslock.acquire`` span
            per acquire (a child of the span current where it is called; its object type,
            outcome, attempts and wait) with an ``EVALSHA <script>`` client span per script call
            under it (docs/api.md lists them): ``True`` for OpenTelemetry's global
            TracerProvider, or a TracerProvider. Default ``None``: no span is made. Needs the
            ``opentelemetry-api`` package; the spans reach the tracer once ended, with their
            times, on the client's telemetry thread.
        spans_level: ``"acquires"`` (the default) or ``"all"``: releases, watchdog rounds and
            every other script call get spans too.
        spans_with_names: add each lock's name to its spans as ``crosslock.lock.name``.
            Default ``False``.

    Raises:
        RedisUnavailableError: the server cannot be reached within ``connect_timeout`` (the
            message names ``host:port``), or it has reached its ``maxclients``.
        AuthenticationError: the server refused the credentials (retrying will not help).
        InvalidArgumentError: a malformed URL, a database the server does not have, or an
            out-of-range option.

    Blocks with the GIL released. Example::

        import crosslock

        client = crosslock.connect("redis://127.0.0.1:6379/0")
        with client.lock("orders:42"):
            ...
        client.close()
    """
    _native._refresh_log_level()
    native = _native.Client.connect(
        _check_url(url),
        *_options(
            connect_timeout,
            response_timeout,
            watchdog_timeout,
            fair_lock_wait_timeout,
            tls_ca_cert,
            wait_for_replicas,
            replica_wait_timeout,
            client_name,
            lanes,
        ),
        **_metrics(metrics, metrics_with_names, spans, spans_level, spans_with_names),
    )
    return Client(native)


async def connect_async(
    url: str,
    *,
    connect_timeout: float = _DEFAULTS["connect_timeout"],
    response_timeout: float = _DEFAULTS["response_timeout"],
    watchdog_timeout: float = _DEFAULTS["watchdog_timeout"],
    fair_lock_wait_timeout: float = _DEFAULTS["fair_lock_wait_timeout"],
    tls_ca_cert: Union[bytes, str, "os.PathLike[str]", None] = None,
    wait_for_replicas: Optional[int] = None,
    replica_wait_timeout: float = _DEFAULTS["replica_wait_timeout"],
    client_name: Optional[str] = None,
    lanes: Lanes = _native.DEFAULT_LANES,
    metrics: Any = None,
    metrics_with_names: bool = False,
    spans: Any = None,
    spans_level: Literal["acquires", "all"] = "acquires",
    spans_with_names: bool = False,
) -> Client:
    """:func:`connect` for asyncio.

    Example::

        async with await crosslock.connect_async("redis://127.0.0.1:6379/0") as client:
            async with client.lock("orders:42"):
                ...
    """
    _native._refresh_log_level()
    native = await _native.Client.connect_async(
        _check_url(url),
        *_options(
            connect_timeout,
            response_timeout,
            watchdog_timeout,
            fair_lock_wait_timeout,
            tls_ca_cert,
            wait_for_replicas,
            replica_wait_timeout,
            client_name,
            lanes,
        ),
        **_metrics(metrics, metrics_with_names, spans, spans_level, spans_with_names),
    )
    return Client(native)


def _interval(interval: object) -> float:
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval >= 0.01:
        raise InvalidArgumentError(f"watch(interval): seconds between snapshots, at least 0.01, got {interval!r}")
    return float(interval)


class Client:
    """A connection to one Redis deployment, with its own client id; made by :func:`connect`.

    It owns a command connection, one subscription connection shared by every waiter of the
    process, and the watchdog that renews its locks. Share one client between all threads and
    tasks. After ``os.fork()`` the child's client gets a new id and fresh connections by itself;
    the child never renews or releases the parent's locks.

    Closing it (``close()``, ``await aclose()``, or leaving ``with``/``async with``) releases the
    locks it holds, stops renewal and fails pending acquires. A client garbage-collected without
    closing (nothing refers to it, nor to its locks) closes its connections and stops renewing:
    the locks it still held expire after their lease.

    Example::

        with crosslock.connect("redis://127.0.0.1:6379/0") as client:
            lock = client.lock("orders:42", on_lost=lambda l: print("lost", l.name))
            with lock:
                print("held by", client.holder())
    """

    def __init__(self, native: _native.Client) -> None:
        self._native = native
        # Lock objects by (name, is-write), the route of lost-lock events: every object whose
        # holds share the Redis field (a Lock and a FencedLock of one name) hears the event.
        self._locks: Routes[_Lockable] = Routes()
        # The owners whose hold of a lock may be lost, by route (`lock_route`: the name, or
        # (name, True) for a write lock), until they acquire it again (through any object of that
        # name): the sticky side of `Lock.lost`.
        self._lost: dict[Hashable, set[int]] = {}
        self._lost_purge_at = 64
        self._permit_sems: Routes[PermitExpirableSemaphore] = Routes()
        # `lock.lost_event()`: per (route, owner), the events to set (in their loops) on loss.
        self._lost_events: dict[tuple[Hashable, int], list[tuple[asyncio.AbstractEventLoop, weakref.ref[asyncio.Event]]]] = {}
        self._locks_guard = threading.Lock()
        self._listen()
        with _clients_guard:
            _clients.add(self)

    def _listen(self) -> None:
        ref = weakref.ref(self)

        def dispatch(name: str, owner: int, kind: str, holder: str) -> None:  # weak: no Rust cycle
            client = ref()
            if client is not None:
                client._dispatch_lost(name, owner, kind, holder)

        self._native.set_lost_listener(dispatch)

    @property
    def id(self) -> str:
        """This client's id in this process (a UUID v4): the ``<client-uuid>`` of its holder
        strings. A forked child's client has a different one."""
        return self._native.id

    @property
    def address(self) -> str:
        """``host:port`` of the server (never the password)."""
        return self._native.address

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    def lock(self, name: str, *, on_lost: Optional[Callable[[Lock], object]] = None) -> Lock:
        """The :class:`Lock` named ``name`` (Redisson's ``getLock(name)``).

        Args:
            name: the lock's key in Redis; a non-empty ``str``.
            on_lost: called as ``on_lost(lock)``, on a background thread, when a hold of this lock
                by this client may be lost (see :attr:`Lock.lost`).

        Raises:
            InvalidArgumentError: an empty name, or one with a lone surrogate
                (``InvalidArgumentTypeError``, also a ``TypeError``, for a non-``str``).
        """
        name = self._checked(name, on_lost)
        return Lock(self, self._native.lock(name), on_lost)

    def fair_lock(self, name: str, *, on_lost: Optional[Callable[[FairLock], object]] = None) -> FairLock:
        """The :class:`FairLock` named ``name`` (Redisson's ``getFairLock(name)``): handed over in
        the order its waiters asked. Arguments and errors as for :meth:`lock`."""
        name = self._checked(name, on_lost)
        return FairLock(self, self._native.fair_lock(name), on_lost)

    def spin_lock(
        self, name: str, *, backoff: Optional[Backoff] = None, on_lost: Optional[Callable[[SpinLock], object]] = None
    ) -> SpinLock:
        """The :class:`SpinLock` named ``name`` (Redisson's ``getSpinLock(name)``): its waiters
        retry with ``backoff`` (default Redisson's: 1 ms doubling to 128 ms) instead of
        subscribing. Arguments and errors as for :meth:`lock`, and ``InvalidArgumentError`` for a
        back-off outside 0 < initial ≤ max ≤ 1 hour."""
        name = self._checked(name, on_lost)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidArgumentTypeError(
                f"backoff of spin lock {name!r} must be a crosslock.Backoff, got {type(backoff).__name__}",
                lock_name=name,
            )
        spec = None
        if backoff is not None:
            spec = (
                backoff.kind,
                _seconds(backoff.initial, "back-off pause", name),
                None if backoff.max is None else _seconds(backoff.max, "maximum back-off pause", name),
            )
        return SpinLock(self, self._native.spin_lock(name, spec), on_lost)

    def fenced_lock(self, name: str, *, on_lost: Optional[Callable[[FencedLock], object]] = None) -> FencedLock:
        """The :class:`FencedLock` named ``name`` (Redisson's ``getFencedLock(name)``): every
        acquisition gets a strictly increasing fencing token. Arguments and errors as for
        :meth:`lock`."""
        name = self._checked(name, on_lost)
        return FencedLock(self, self._native.fenced_lock(name), on_lost)

    def non_reentrant_lock(self, name: str, *, on_lost: Optional[Callable[[NonReentrantLock], object]] = None) -> NonReentrantLock:
        """The :class:`NonReentrantLock` named ``name``: a second acquire by its holder raises
        :class:`NonReentrantError`. Arguments and errors as for :meth:`lock`."""
        name = self._checked(name, on_lost)
        return NonReentrantLock(self, self._native.non_reentrant_lock(name), on_lost)

    def non_reentrant_fair_lock(
        self, name: str, *, on_lost: Optional[Callable[[NonReentrantFairLock], object]] = None
    ) -> NonReentrantFairLock:
        """The :class:`NonReentrantFairLock` named ``name`` (Redisson's
        ``getNonReentrantFairLock(name)``): a :class:`FairLock` whose holder's second acquire raises
        :class:`NonReentrantError`. Arguments and errors as for :meth:`lock`."""
        name = self._checked(name, on_lost)
        return NonReentrantFairLock(self, self._native.non_reentrant_fair_lock(name), on_lost)

    def group_lock(
        self,
        group: str,
        values: Iterable[str],
        *,
        codec: str = "kryo5",
        on_lost: Optional[Callable[[GroupLock], object]] = None,
    ) -> GroupLock:
        """The :class:`GroupLock` on ``values`` of ``group`` (Redisson's
        ``getMultiLock(group, values)``): all the values or none.

        Args:
            group: the group's name, its hash in Redis.
            values: the values to lock, strings (as the Java side passes ``String``s); at least
                one, each once.
            codec: how the Java side encodes values: ``"kryo5"`` (Redisson's default
                ``Kryo5Codec``) or ``"string"`` (``StringCodec``).
            on_lost: as for :meth:`lock`.

        Raises:
            InvalidArgumentError: no values, a value given twice, an unknown codec, or an empty
                group name.
            InvalidArgumentTypeError: ``values`` is a single string or holds a non-string.
        """
        group = self._checked(group, on_lost)
        if isinstance(values, (str, bytes)):
            raise InvalidArgumentTypeError(
                f"values of group lock {group!r} must be a list of strings, got a single "
                f"{type(values).__name__}; write [{values!r}] to lock one value",
                lock_name=group,
            )
        try:
            listed = list(values)
        except TypeError:
            raise InvalidArgumentTypeError(
                f"values of group lock {group!r} must be a list of strings, got {type(values).__name__}",
                lock_name=group,
            ) from None
        for value in listed:
            if not isinstance(value, str):
                raise InvalidArgumentTypeError(
                    f"values of group lock {group!r} must be strings (as the Java side passes "
                    f"String values), got {type(value).__name__} {value!r}; convert it with str()",
                    lock_name=group,
                )
        if not isinstance(codec, str):
            raise InvalidArgumentTypeError(
                f"codec of group lock {group!r} must be \"kryo5\" or \"string\", got {type(codec).__name__}",
                lock_name=group,
            )
        native, fields = self._native.group_lock(group, listed, codec)
        return GroupLock(self, native, fields, on_lost)

    def read_write_lock(
        self, name: str, *, on_lost: Optional[Callable[[Union[ReadLock, WriteLock]], object]] = None
    ) -> ReadWriteLock:
        """The :class:`ReadWriteLock` named ``name`` (Redisson's ``getReadWriteLock(name)``):
        :meth:`~ReadWriteLock.read_lock` for many readers, :meth:`~ReadWriteLock.write_lock` for
        one writer. ``on_lost`` is called with the read or write lock whose hold may be lost.
        Arguments and errors as for :meth:`lock`."""
        name = self._checked(name, on_lost)
        read, write = self._native.read_write_lock(name)
        return ReadWriteLock(ReadLock(self, read, on_lost), WriteLock(self, write, on_lost))

    def semaphore(self, name: str) -> Semaphore:
        """The :class:`Semaphore` named ``name`` (Redisson's ``getSemaphore(name)``). Name rules as
        for :meth:`lock`."""
        name = _check_name(name, "semaphore")
        return Semaphore(self, self._native.semaphore(name))

    def permit_expirable_semaphore(
        self, name: str, *, on_lost: Optional[PermitLostCallback] = None
    ) -> PermitExpirableSemaphore:
        """The :class:`PermitExpirableSemaphore` named ``name`` (Redisson's
        ``getPermitExpirableSemaphore(name)``). ``on_lost(semaphore, permit_id)`` is called, on a
        background thread, when a permit this client took may be lost. Name rules as for
        :meth:`lock`."""
        name = self._checked(name, on_lost)
        return PermitExpirableSemaphore(self, self._native.permit_expirable_semaphore(name), on_lost)

    def count_down_latch(self, name: str) -> CountDownLatch:
        """The :class:`CountDownLatch` named ``name`` (Redisson's ``getCountDownLatch(name)``).
        Name rules as for :meth:`lock`."""
        name = _check_name(name, "latch")
        return CountDownLatch(self, self._native.count_down_latch(name))

    def inspect(self, name: str) -> Inspection:
        """What lives at ``name``, as Redis has it now, as a plain dict (:class:`Inspection`): its
        kind, the seconds left on its lease, each holder with its hold count (a reader with the
        seconds left on each read hold), a fair lock's queue with each waiter's deadline, a fenced
        lock's last token, a counter's value, a permit-expirable semaphore's permits. Read in one
        call; nothing is changed. The same data as ``python -m crosslock inspect NAME``.

        Example::

            seen = client.inspect("orders:42")
            for h in seen["holders"]:
                print(h["holder"], "holds it", h["holds"], "time(s);", seen["ttl"], "s left")
        """
        return self._native.inspect(_check_name(name, "object"))

    async def inspect_async(self, name: str) -> Inspection:
        """:meth:`inspect` for asyncio."""
        return await self._native.inspect_async(_check_name(name, "object"))

    def watch(self, name: str, interval: float = 0.1) -> Watch:
        """Follows the object at ``name`` live: a :class:`Watch` that yields each change
        (acquire, re-entry, release, expiry, force-unlock, queue and count changes) as a
        :class:`WatchEvent` dict, until closed. The same events as
        ``python -m crosslock watch NAME``.

        It subscribes to every channel the object can publish on (on a connection of its own) and
        takes a snapshot after each message and at least every ``interval`` seconds (>= 0.01), so
        changes that publish nothing (an acquire) are seen within ``interval``.

        Example::

            with client.watch("orders:42") as watch:
                for event in watch:
                    print(event["text"])  # 2026-11-24T22:15:01.123Z  released  orders:42  …
        """
        name = _check_name(name, "object")
        return Watch(self._native.watch(name, _interval(interval)), name)

    async def watch_async(self, name: str, interval: float = 0.1) -> Watch:
        """:meth:`watch` for asyncio: iterate the result with ``async for``."""
        name = _check_name(name, "object")
        return Watch(await self._native.watch_async(name, _interval(interval)), name)

    def scan(self, pattern: str = "*", limit: int = 1000) -> list[str]:
        """The names of the objects whose names match ``pattern`` (Redis glob syntax), sorted, at
        most ``limit``; found with ``SCAN``, never ``KEYS``, so it is safe on a busy server. A key
        that lives beside an object (a fair lock's queue, a fenced lock's token counter) stands for
        its object's name."""
        if not isinstance(pattern, str) or not pattern:
            raise InvalidArgumentError(f"scan(pattern): a non-empty glob pattern such as 'orders:*', got {pattern!r}")
        return self._native.scan(pattern, _whole(limit, "scan_limit", "scan(limit): the number of names"))

    async def scan_async(self, pattern: str = "*", limit: int = 1000) -> list[str]:
        """:meth:`scan` for asyncio."""
        if not isinstance(pattern, str) or not pattern:
            raise InvalidArgumentError(f"scan(pattern): a non-empty glob pattern such as 'orders:*', got {pattern!r}")
        return await self._native.scan_async(pattern, _whole(limit, "scan_limit", "scan(limit): the number of names"))

    def _register_permits(self, sem: PermitExpirableSemaphore) -> None:
        with self._locks_guard:
            self._permit_sems.add(sem.name, sem)

    def _checked(self, name: object, on_lost: object) -> str:
        name = _check_name(name)
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgumentTypeError(
                f"on_lost of lock {name!r} must be callable, got {type(on_lost).__name__}",
                lock_name=name,
            )
        return name

    def _was_lost(self, route: Hashable, owner: int) -> bool:
        with self._locks_guard:
            return owner in self._lost.get(route, ())

    def _note_lost(self, route: Hashable, owner: int) -> None:
        """The caller found its hold lost itself (a read, a release): ``lost`` stays true until it
        acquires again, whenever the dispatcher thread gets the event."""
        with self._locks_guard:
            self._lost.setdefault(route, set()).add(owner)

    def _forget_lost(self, route: Hashable, owner: int) -> None:
        with self._locks_guard:
            owners = self._lost.get(route)
            if owners is not None:
                owners.discard(owner)
                if not owners:
                    del self._lost[route]

    def _add_lost_event(
        self, route: Hashable, owner: int, loop: asyncio.AbstractEventLoop, event: asyncio.Event
    ) -> None:
        with self._locks_guard:
            live = [(lp, ref) for lp, ref in self._lost_events.get((route, owner), []) if ref() is not None]
            live.append((loop, weakref.ref(event)))
            self._lost_events[(route, owner)] = live
            if len(self._lost_events) >= 64:  # forget the keys whose events are all gone
                self._lost_events = {
                    k: v for k, v in self._lost_events.items() if any(ref() is not None for _, ref in v)
                }

    def _set_lost_events(self, route: Hashable, owner: int) -> None:
        with self._locks_guard:
            waiting = self._lost_events.pop((route, owner), [])
        for loop, ref in waiting:
            event = ref()
            if event is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(event.set)
                except RuntimeError:  # the loop closed meanwhile
                    pass

    def _register(self, lock: _Lockable) -> None:
        """Called by every lock object: the route of its lost-lock events."""
        with self._locks_guard:
            self._locks.add(lock._route, lock)

    def holder(self) -> str:
        """The holder string (``<client-uuid>:<n>``) of the calling thread or asyncio task: what
        Redis stores for its holds."""
        return self._native.holder(current_owner())

    def close(self) -> None:
        """Releases this client's locks, stops renewal, fails pending acquires and closes the
        connections. Idempotent.

        The close of the last open client (once calls still running on other threads have ended)
        returns after crosslock's threads are joined: a ``fork()`` after it finds none (Python
        3.12+ warns about forking a multi-threaded process), and the next :func:`connect` starts
        them again."""
        self._native.close()

    async def aclose(self) -> None:
        """:meth:`close` for asyncio. Cancelling it (``asyncio.wait_for`` on shutdown) only stops
        the waiting: the client is closed at once, and its locks are released and its connections
        closed in the background all the same. After the last client's, crosslock's threads end in
        the background (the sync :meth:`close` waits for them)."""
        await self._native.close_async()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<crosslock.Client {self.address} id={self.id!r} {state}>"

    # -- internals ---------------------------------------------------------------------------

    def _dispatch_lost(self, name: str, owner: int, kind: str, holder: str) -> None:
        """Runs on the dispatcher thread when a hold of (name, owner) may be lost."""
        if kind == _PERMIT:
            with self._locks_guard:
                sems = self._permit_sems.get(name)
            for sem in sems:
                sem._mark_lost(holder)
            for sem in sems:
                if sem.on_lost is not None:
                    try:
                        sem.on_lost(sem, holder)
                    except Exception as exc:  # nobody to catch it on this thread
                        _native._write_unraisable(exc, sem.on_lost)
            return
        route = lock_route(name, kind == _WRITE_LOCK)
        with self._locks_guard:
            locks = self._locks.get(route)
        # Sticky only while core still records the lost hold: an event that comes after the
        # owner released it (the release marked it, `_note_lost`) and acquired it again must not
        # mark the new hold lost.
        still = any(lock._native.is_lost(owner) for lock in locks)
        with self._locks_guard:
            if still:
                self._lost.setdefault(route, set()).add(owner)
            if len(self._lost) >= self._lost_purge_at:  # names no object of which is left
                self._lost = {r: owners for r, owners in self._lost.items() if self._locks.get(r)}
                self._lost_purge_at = max(64, 2 * len(self._lost))
        if still:
            self._set_lost_events(route, owner)
        for lock in locks:
            callback = lock.on_lost
            if callback is None:
                continue
            try:
                callback(lock)
            except Exception as exc:  # nobody to catch it on this thread
                _native._write_unraisable(exc, callback)

    def _reset_after_fork(self) -> None:
        self._locks_guard = threading.Lock()
        self._listen()  # the dispatcher thread did not survive the fork
        for sem in self._permit_sems:
            sem._reset_after_fork()
        self._lost = {}
        self._lost_events = {}


def _reset_clients_after_fork() -> None:
    # The child's only thread: the guard may have been held by a thread that did not survive the
    # fork, so it is made anew rather than taken.
    global _clients_guard
    _clients_guard = threading.Lock()
    for client in list(_clients):
        client._reset_after_fork()
