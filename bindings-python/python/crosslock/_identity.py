"""Who is calling: the ``<n>`` of the holder string ``<client-uuid>:<n>`` (Redisson's thread id).

* A thread gets a number from a process-wide counter the first time it asks, kept in a
  ``threading.local``.
* An asyncio task gets its own number, kept in a ``WeakKeyDictionary`` keyed by the task, so two
  tasks on one thread exclude each other and a task re-enters its own lock. (A ``ContextVar``
  would be wrong: a child task inherits its parent's context and would re-enter the parent's
  lock.) Sync methods called from inside a running task use the task's number too.

Threads and tasks draw from the same counter, so their numbers never collide. After ``fork()``
the caches are cleared (the child's client has a new id anyway).

An explicit :class:`Owner` overrides both for the ``with`` block it is entered in (a stack per
thread and per task), so a hold can be taken in one thread or task and released in another.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import threading
import weakref
from typing import Any, Optional

_counter = itertools.count(1)
_counter_lock = threading.Lock()
_thread = threading.local()
_tasks: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
_tasks_lock = threading.Lock()


def _next_number() -> int:
    with _counter_lock:
        return next(_counter)


def _running_task() -> Optional[asyncio.Task[Any]]:
    # Asked on every call: outside an event loop, asyncio.current_task() raises (about 1 us of
    # exception machinery per call); _get_running_loop() just answers None.
    loop = asyncio._get_running_loop()
    return None if loop is None else asyncio.current_task(loop)


_task_scopes: weakref.WeakKeyDictionary[asyncio.Task[Any], list[int]] = weakref.WeakKeyDictionary()


class Owner:
    """An explicit holder identity, for a hold taken in one thread or asyncio task and released in
    another (request middleware, callbacks, producer/consumer hand-offs): Redisson's
    ``lock(threadId)`` / ``unlock(threadId)``, Node's ``{ owner }`` and ``runAsOwner``.

    Inside ``with owner:`` every lock call of this thread (or, in a coroutine, of this task) acts as
    ``owner`` instead of as the thread or task: acquire, release, re-entry, ``is_held``,
    ``hold_count``, ``lost``. Enter the same ``Owner`` wherever the hold continues. Scopes nest
    (the innermost wins) and end with their block. An ``Owner`` is a number drawn from the same
    counter as threads and tasks, so it never collides with one.

    Example::

        owner = crosslock.Owner()
        with owner:
            lock.acquire()                  # taken here, in the request's thread...
        ...
        def finish():                       # ...released later from a worker thread
            with owner:
                lock.release()
    """

    __slots__ = ("number",)

    def __init__(self) -> None:
        self.number: int = _next_number()

    def __enter__(self) -> Owner:
        _scopes().append(self.number)
        return self

    def __exit__(self, *exc_info: object) -> None:
        scopes = _scopes()
        if scopes and scopes[-1] == self.number:
            scopes.pop()

    def __repr__(self) -> str:
        return f"<crosslock.Owner {self.number}>"


def _scopes() -> list[int]:
    """The Owner scopes entered by the running task, else by the calling thread."""
    task = _running_task()
    if task is not None:
        with _tasks_lock:
            mine = _task_scopes.get(task)
            if mine is None:
                mine = _task_scopes[task] = []
        return mine
    ours: Optional[list[int]] = getattr(_thread, "scopes", None)
    if ours is None:
        ours = _thread.scopes = []
    return ours


def current_owner() -> int:
    """The owner number of the innermost :class:`Owner` scope, else of the calling asyncio task,
    else of the calling thread."""
    task = _running_task()
    scopes: Optional[list[int]] = _task_scopes.get(task) if task is not None else getattr(_thread, "scopes", None)
    if scopes:
        return scopes[-1]
    if task is not None:
        with _tasks_lock:
            number = _tasks.get(task)
            if number is None:
                number = _tasks[task] = _next_number()
        return number
    number = getattr(_thread, "number", None)
    if number is None:
        number = _thread.number = _next_number()
    return number


def _reset_after_fork() -> None:
    """In a forked child: forget every cached number and re-create the locks (another thread may
    have held one at the fork)."""
    global _counter_lock, _thread, _tasks, _tasks_lock, _task_scopes, _task_holds
    _counter_lock = threading.Lock()
    _thread = threading.local()
    _tasks = weakref.WeakKeyDictionary()
    _task_scopes = weakref.WeakKeyDictionary()
    _task_holds = weakref.WeakKeyDictionary()
    _tasks_lock = threading.Lock()


# -- holds whose owner ended ---------------------------------------------------------------------
#
# A hold taken as the calling thread's or task's own identity (not inside an ``Owner`` scope) can
# only ever be released by that thread or task: its number dies with it. So each one keeps the
# holds it took: a thread in a ``threading.local`` entry whose finalizer runs when the thread
# ends, a task in a done-callback. What is still held then is logged (a WARNING on the logger
# ``crosslock`` naming the lock, the holder and where it was acquired) and, when the watchdog
# keeps it (renewed for ever otherwise), released, on a short helper thread (a dead thread
# cannot wait for Redis; a loop must not); a hold taken with a lease is left to expire.

_log = logging.getLogger("crosslock")
_PACKAGE_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep


class _Holds:
    """The holds one thread or task took as itself: lock object → [times, where first taken]."""

    __slots__ = ("owner", "what", "pid", "held", "__weakref__")

    def __init__(self, owner: int, what: str) -> None:
        self.owner = owner
        self.what = what
        self.pid = os.getpid()
        self.held: dict[Any, list[Any]] = {}

    def ended(self) -> None:
        held, self.held = self.held, {}
        # Not in a forked child (the parent's holds are not its own) nor at interpreter exit.
        if held and self.pid == os.getpid() and not sys.is_finalizing():
            _release_leaked(self.owner, self.what, held)

    def __del__(self) -> None:  # the thread ended: its threading.local entry is dropped
        try:
            self.ended()
        except Exception:  # pragma: no cover - nothing may escape a finalizer
            pass


_task_holds: weakref.WeakKeyDictionary[asyncio.Task[Any], _Holds] = weakref.WeakKeyDictionary()


def _caller_site() -> str:
    """``file:line`` of the first frame outside this package (where the user acquired)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_PREFIX):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:  # pragma: no cover
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _own_holds(owner: int, create: bool = True) -> Optional[_Holds]:
    """The caller's hold record, when it acts (as ``owner``) as its own thread or task (``None``
    in an ``Owner`` scope: such a hold is meant to outlive its thread or task)."""
    task = _running_task()
    if task is not None:
        if _task_scopes.get(task):
            return None
        with _tasks_lock:
            holds = _task_holds.get(task)
            if holds is None and create:
                holds = _task_holds[task] = _Holds(owner, f"asyncio task {task.get_name()!r}")
                new = True
            else:
                new = False
        if new:
            task.add_done_callback(_task_ended)
        return holds
    if getattr(_thread, "scopes", None):
        return None
    holds = getattr(_thread, "holds", None)
    if holds is None and threading.current_thread() is threading.main_thread():
        return None  # it ends with the process (and a record would keep the lock's client alive)
    if holds is None and create:
        holds = _thread.holds = _Holds(owner, f"thread {threading.current_thread().name!r}")
    return holds


def _task_ended(task: asyncio.Task[Any]) -> None:
    with _tasks_lock:
        holds = _task_holds.pop(task, None)
    if holds is not None:
        holds.ended()


#: ``note_acquired``'s default: the record of whoever calls it.
CALLER: Any = object()


def holds_of(owner: int, create: bool = True) -> Optional[_Holds]:
    """The hold record of the caller (as ``owner``), taken when an async acquire or release is
    begun: the task that awaits it may be another (see ``_lockable._acquired_async``)."""
    return _own_holds(owner, create)


def note_acquired(lock: Any, owner: int, renewed: bool, holds: Any = CALLER) -> None:
    """``lock`` was acquired by the caller, as ``owner`` (one more hold); ``renewed``: without a
    lease (the watchdog keeps it). ``holds``: the record to note it in, when not the caller's
    (:func:`holds_of` at the acquire's start)."""
    if holds is CALLER:
        holds = _own_holds(owner)
    if holds is None:
        return
    entry = holds.held.get(lock)
    if entry is None:
        holds.held[lock] = [1, _caller_site(), renewed]
    else:
        entry[0] += 1
        entry[2] = entry[2] or renewed


def note_released(lock: Any, owner: int, all_of_it: bool = False, holds: Any = CALLER) -> None:
    """One hold of ``lock`` by the caller (``owner``) was released (``all_of_it``: none is left);
    ``holds`` as for :func:`note_acquired`."""
    if holds is CALLER:
        holds = _own_holds(owner, create=False)
    if holds is None:
        return
    entry = holds.held.get(lock)
    if entry is not None:
        entry[0] -= 1
        if all_of_it or entry[0] <= 0:
            del holds.held[lock]


def _release_leaked(owner: int, what: str, held: dict[Any, list[Any]]) -> None:
    def release() -> None:
        for lock, (_, site, renewed) in held.items():
            try:
                lock._release_leaked(owner, what, site, renewed)
            except Exception as exc:  # a closed client, Redis out of reach: it expires instead
                _log.warning("could not release lock %r left held by an ended %s: %s", lock.name, what, exc)

    threading.Thread(target=release, name="crosslock-leaked-hold", daemon=True).start()
