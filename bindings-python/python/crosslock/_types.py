"""The one thing the objects' host classes need of their client, as a protocol: a leaf module,
so that ``semaphore.py``, ``permit_expirable_semaphore.py`` and ``count_down_latch.py`` need not
import ``client.py`` (which imports them) even to type-check."""

from __future__ import annotations

from typing import Any, Protocol

__all__: list[str] = []


class ClientLike(Protocol):
    """What an object keeps of the :class:`~crosslock.Client` that made it: a reference (which
    keeps the client, and its lost-permit dispatch, alive) and the registry of permit-expirable
    semaphores whose lost permits it routes."""

    @property
    def id(self) -> str: ...

    def _register_permits(self, sem: Any) -> None: ...
