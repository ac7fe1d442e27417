"""_held.py -- what every held form is, whichever client holds it: its arguments, the
calls that acquire, extend and release it (Held for a lock, PermitCalls for a permit of a
semaphore, SetCalls for a set of names), what its grant said, and what its holder may
assume now (remaining, owned, check).  lock.py adds the blocking client's keeping (a
thread), aio_lock.py the asyncio client's (a task); both read the belief of _belief.py."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import time

from . import _proto
from ._proto import Call, Seconds
from .errors import LeaseLost

KEEPALIVES = ("stream", "extend")


class Held:
    """The state and calls of a held lock; the keeping is a subclass's."""

    _what = "lock"
    _let_go_always = False       # a set: one name gone is not the others

    def __init__(self, client: Any, name: str, *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 shared: bool = False, reentrant: bool = False,
                 on_lost: Optional[Callable[[], Any]] = None):
        if keepalive not in KEEPALIVES:
            raise ValueError("keepalive must be one of %s" % (KEEPALIVES,))
        self.ttl = _proto.seconds(ttl, "ttl")
        if self.ttl <= 0:
            raise ValueError("ttl must be positive")
        if wait is not None:
            _proto.seconds(wait, "wait")
        if reentrant and shared:
            raise ValueError("reentrant holds are exclusive")
        self.client = client
        self.name = name
        self.wait = wait
        self.owner = owner
        self.keepalive = keepalive
        self.shared = shared
        self.reentrant = reentrant
        self.on_lost = on_lost
        self.grant: Optional[Any] = None
        self.holds = 0
        self._lease = lease
        self._belief: Optional[Any] = None        # a Belief, or an AsyncBelief
        self._session: Optional[Any] = None       # a duplex hold's DuplexSession
        self._release_confirmed: Optional[bool] = None
        self._let_go_at: Optional[float] = None
        self._used = False
        self._released = False
        self._release_wanted = False

    def __repr__(self) -> str:
        lost = getattr(self, "lost", None)
        state = ("lost" if lost is not None and lost.is_set() else "held") \
            if self.grant else "not held"
        return "<%s %r %s>" % (type(self).__name__, self.name, state)   # never the lease

    # -- what it is a hold of (PermitCalls and SetCalls override these) ---------------------
    def _acquire_call(self, lease: str, reentrant: bool = False) -> Call:
        return _proto.acquire(self.name, self.ttl, self.wait, lease, self.owner, self.shared,
                              reentrant)

    def _extend_calls(self, lease: str) -> List[Call]:
        return [_proto.extend(_proto.lock_path(self.name), lease, self.ttl)]

    def _release_call(self, lease: str) -> Call:
        return _proto.release(_proto.lock_path(self.name), lease)

    @staticmethod
    def _late(grant: Any) -> bool:
        """A grant that came after a long wait may have little of its validity left,
        counted from the request's send: it is confirmed by a fresh validity (an answered
        ping, an extension) before it is handed out."""
        return grant.remaining() < grant.validity / 2

    # -- what the grant said ----------------------------------------------------------------
    def _granted(self) -> Any:
        if self.grant is None:
            raise RuntimeError("the %s %r has not been acquired" % (self._what, self.name))
        return self.grant

    @property
    def lease(self) -> str:
        return self._granted().lease

    @property
    def fencing_token(self) -> int:
        return self._granted().fencing_token

    @property
    def validity(self) -> float:
        """The grant's validity, in seconds."""
        return self._granted().validity

    @property
    def deadline(self) -> float:
        """time.monotonic() until which the holder may assume it holds the lock (0 before
        it is acquired)."""
        return self._belief.deadline if self._belief is not None else 0.0

    @property
    def lost_reason(self) -> Optional[str]:
        return self._belief.core.reason if self._belief is not None else None

    @property
    def lost_at(self) -> Optional[float]:
        """time.monotonic() when `lost` was set (None while not lost)."""
        return self._belief.core.lost_at if self._belief is not None else None

    @property
    def let_go_at(self) -> Optional[float]:
        """time.monotonic() just before the release was sent (by release(), or by the
        keeper once the lock was lost); None if it was not."""
        return self._session.let_go_at if self._session is not None else self._let_go_at

    @property
    def release_confirmed(self) -> Optional[bool]:
        """Whether the service confirmed that the lock is free at its release (False: it
        finishes the release itself, and the lock may stay taken until its ttl ends);
        None before a release, or when no answer came."""
        if self._session is not None:
            return self._session.release_confirmed
        return self._release_confirmed

    # -- what the holder may assume now -----------------------------------------------------
    def remaining(self) -> float:
        """Seconds the holder may still assume it holds the lock (<= 0: not any more)."""
        return self.deadline - time.monotonic()

    def owned(self) -> bool:
        """Whether this holder still holds it: acquired, not released, not lost, and its
        validity (less the loss margin) not over.  Reads the clock itself."""
        b = self._belief
        if b is None or self._released or b.core.is_lost:
            return False
        return time.monotonic() < b.core.lose_at

    def check(self) -> None:
        """Raise LeaseLost unless owned() (use it right before touching the resource)."""
        self._granted()
        if not self.owned():
            raise LeaseLost("the %s %r is not held: %s" % (
                self._what, self.name, self.lost_reason or
                ("released" if self._released else "its validity ran out")))

    def _lost_error(self) -> LeaseLost:
        return LeaseLost("lost the %s %r while holding it: %s"
                         % (self._what, self.name, self.lost_reason))


class PermitCalls:
    """A permit of a semaphore: its calls (mixed in before Held's keeper)."""

    _what = "semaphore"
    name: str
    permits: int
    ttl: float
    wait: Optional[Seconds]
    owner: Optional[str]

    @staticmethod
    def _check_permits(permits: Any) -> int:
        if not isinstance(permits, int) or isinstance(permits, bool) or permits < 1:
            raise ValueError("permits must be a positive integer")
        return permits

    def _acquire_call(self, lease: str, reentrant: bool = False) -> Call:
        return _proto.acquire_permit(self.name, self.permits, self.ttl, self.wait, lease,
                                     self.owner)

    def _extend_calls(self, lease: str) -> List[Call]:
        return [_proto.extend(_proto.sem_path(self.name), lease, self.ttl)]

    def _release_call(self, lease: str) -> Call:
        return _proto.release(_proto.sem_path(self.name), lease)

    @property
    def slot(self) -> int:
        return self._granted().slot      # type: ignore[attr-defined]


class SetCalls:
    """A set of names held under one lease: its calls (mixed in before Held's keeper).
    No streamed hold of a set exists: it is kept by extensions of each name."""

    _what = "lock set"
    _let_go_always = True
    names: Tuple[str, ...]
    modes: Dict[str, str]
    ttl: float
    wait: Optional[Seconds]

    def _set_names(self, names: Iterable[str], modes: Optional[Mapping[str, str]]) -> str:
        self.names = tuple(names)
        self.modes = dict(modes or {})
        return ",".join(self.names)

    def _acquire_call(self, lease: str, reentrant: bool = False) -> Call:
        return _proto.acquire_many(self.names, self.ttl, self.wait, lease, self.modes)

    def _extend_calls(self, lease: str) -> List[Call]:
        return [_proto.extend(_proto.lock_path(n), lease, self.ttl) for n in self.names]

    def _release_call(self, lease: str) -> Call:
        return _proto.release_many(lease)

    @property
    def fencing_tokens(self) -> Dict[str, int]:
        return dict(self._granted().fencing_tokens)      # type: ignore[attr-defined]

    @property
    def fencing_token(self) -> int:
        raise AttributeError("a set has one fencing token per name: fencing_tokens[name]")
