"""Lock objects by the hold they share, held weakly: the route of lost-hold events.

A client keeps one entry per lock name (and per semaphore for permits) for as long as lock objects
of that name are alive, so the entry must cost little: with 10,000 locks held, a ``WeakSet`` per
name was 1.7 KB per lock, more than the hold itself. Here a name's entry is a single
``weakref.ref`` (the usual case: one object per name), or a list of them when several objects share
the name. Dead references are dropped as a list grows, and names whose objects are all gone as the
table grows, so neither grows with objects that no longer exist.

Not thread-safe: the client calls it under its own lock.
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, Hashable, Iterator, TypeVar, Union

_T = TypeVar("_T")

_Entry = Union["weakref.ReferenceType[Any]", "list[weakref.ReferenceType[Any]]"]


def lock_route(name: str, write: bool) -> Hashable:
    """The key of a lock's lost-hold route: its name, or ``(name, True)`` for a write lock (whose
    holder strings end in ``:write``). The name alone in the usual case: a tuple per lock cost 56
    bytes more."""
    return (name, True) if write else name


def _refs(entry: _Entry) -> "list[weakref.ReferenceType[Any]]":
    return entry if isinstance(entry, list) else [entry]


def _alive(entry: _Entry) -> bool:
    return any(ref() is not None for ref in _refs(entry))


class Routes(Generic[_T]):
    """Objects by key, weakly held (see the module docs)."""

    __slots__ = ("_table", "_purge_at")

    def __init__(self) -> None:
        self._table: dict[Hashable, _Entry] = {}
        self._purge_at = 64

    def add(self, key: Hashable, obj: _T) -> None:
        ref = weakref.ref(obj)
        entry = self._table.get(key)
        if entry is None or (not isinstance(entry, list) and entry() is None):
            self._table[key] = ref
        elif not isinstance(entry, list):
            self._table[key] = [entry, ref]
        else:
            entry.append(ref)
            n = len(entry)
            if n >= 8 and n & (n - 1) == 0:  # at 8, 16, 32, …: amortized O(1) per add
                entry[:] = [r for r in entry if r() is not None]
        if len(self._table) >= self._purge_at:
            self._table = {k: e for k, e in self._table.items() if _alive(e)}
            self._purge_at = max(64, 2 * len(self._table))

    def get(self, key: Hashable) -> list[_T]:
        """The live objects of ``key``."""
        entry = self._table.get(key)
        if entry is None:
            return []
        return [obj for obj in (ref() for ref in _refs(entry)) if obj is not None]

    def __iter__(self) -> Iterator[_T]:
        """Every live object."""
        for entry in list(self._table.values()):
            for ref in _refs(entry):
                obj = ref()
                if obj is not None:
                    yield obj

    def __len__(self) -> int:
        """How many keys have an entry (live or not yet purged)."""
        return len(self._table)
