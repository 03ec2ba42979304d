"""The :class:`SpinLock` (Redisson's ``RSpinLock`` twin) and its :class:`Backoff`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ._lockable import _Lockable

__all__ = ["SpinLock", "Backoff"]


@dataclass(frozen=True)
class Backoff:
    """How long a :class:`SpinLock` waiter pauses between attempts.

    Use :meth:`exponential` (Redisson's default: 1 ms doubling, with jitter, to 128 ms) or
    :meth:`constant`.

    Example::

        lock = client.spin_lock("jobs", backoff=crosslock.Backoff.constant(0.064))
    """

    kind: str
    initial: float
    max: Optional[float] = None

    @classmethod
    def exponential(cls, initial: float = 0.001, max: float = 0.128) -> Backoff:
        """``initial`` seconds, then twice the previous pause (plus jitter), at most ``max``."""
        return cls("exponential", initial, max)

    @classmethod
    def constant(cls, pause: float = 0.064) -> Backoff:
        """The same ``pause`` (seconds) every time."""
        return cls("constant", pause)


class SpinLock(_Lockable):
    """A reentrant lock whose waiters never subscribe: they retry with a back-off instead.

    Get one with :meth:`crosslock.Client.spin_lock`. Stored exactly as Redisson's ``RSpinLock``
    (the ``RLock`` hash; a release publishes nothing), so it excludes :class:`~crosslock.Lock`
    holders of the same name.

    Use it where pub/sub is scarce or costly (very many waiting processes, a proxy or managed
    service without pub/sub, a large cluster); the price is hand-off latency: a waiter notices a
    release at its next retry.

    Example::

        with client.spin_lock("reports:nightly"):
            ...
    """

    __slots__ = ()
