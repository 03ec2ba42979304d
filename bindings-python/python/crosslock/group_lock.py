"""The :class:`GroupLock`, Redisson's ``getMultiLock(group, values)`` twin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Optional

from . import _native
from ._lockable import LostCallback, _Lockable
from ._routes import lock_route

if TYPE_CHECKING:
    from .client import Client

__all__ = ["GroupLock"]


class GroupLock(_Lockable):
    """Many values of one group locked at once, all or none, shared with Java services calling
    Redisson's ``redisson.getMultiLock(group, values)`` (``RedissonFasterMultiLock``).

    Get one with :meth:`crosslock.Client.group_lock`. Redis holds one hash at the group's name;
    each value is a field named by a hash of the value as the Java codec encodes it (``codec``:
    ``"kryo5"``, Redisson's default, or ``"string"`` for a Redisson configured with
    ``StringCodec``). Sets that share a value exclude each other; disjoint sets of one group do
    not. A release publishes ``0`` on ``redisson_lock__channel:{group}``.

    Each thread, and each asyncio task, is its own holder and may re-enter; :attr:`name` is the
    group; everything else about holding it (lease, watchdog, the lost signal) is described on the
    base class.

    Example::

        lock = client.group_lock("orders", ["42", "43"])
        with lock:                          # orders 42 and 43 are ours
            ...
    """

    __slots__ = ("_fields",)

    def __init__(
        self, client: Client, native: _native.Lock, fields: list[str], on_lost: Optional[LostCallback]
    ) -> None:
        self._fields = tuple(fields)
        super().__init__(client, native, on_lost)

    @property
    def fields(self) -> tuple[str, ...]:
        """The hash fields of its values, sorted (Redisson's names for them)."""
        return self._fields

    @property
    def _route(self) -> Hashable:
        # Its holds are recorded per set of values: "<group>#<field>,<field>…".
        return lock_route(f"{self.name}#{','.join(self._fields)}", False)
