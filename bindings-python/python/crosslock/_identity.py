"""Who is calling: the ``<n>`` of the holder string ``<client-uuid>:<n>`` (Redisson's thread id).

* A thread gets a number from a process-wide counter the first time it asks, kept in a
  ``threading.local``.
* An asyncio task gets its own number, kept in a ``WeakKeyDictionary`` keyed by the task, so two
  tasks on one thread exclude each other and a task re-enters its own lock. (A ``ContextVar``
  would be wrong: a child task inherits its parent's context and would re-enter the parent's
  lock.) Sync methods called from inside a running task use the task's number too.

Threads and tasks draw from the same counter, so their numbers never collide. After ``fork()``
the caches are cleared (the child's client has a new id anyway).
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
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop in this thread
        return None


def current_owner() -> int:
    """The owner number of the calling asyncio task, else of the calling thread."""
    task = _running_task()
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
    global _counter_lock, _thread, _tasks, _tasks_lock
    _counter_lock = threading.Lock()
    _thread = threading.local()
    _tasks = weakref.WeakKeyDictionary()
    _tasks_lock = threading.Lock()
