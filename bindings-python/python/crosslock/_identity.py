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
    global _counter_lock, _thread, _tasks, _tasks_lock, _task_scopes
    _counter_lock = threading.Lock()
    _thread = threading.local()
    _tasks = weakref.WeakKeyDictionary()
    _task_scopes = weakref.WeakKeyDictionary()
    _tasks_lock = threading.Lock()
