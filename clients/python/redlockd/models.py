"""models.py -- what the service answers, as frozen dataclasses, and the functions that
read them from its JSON (no I/O here: the blocking and the asyncio clients share them).

Durations are seconds (float) throughout.  A `deadline` is a time.monotonic() value:
the moment until which the holder may assume it holds what it was granted, counted from
the send of the request whose round granted it (the only moment known to precede that
round), never from the answer's arrival."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import ProtocolError


def _int(doc: Mapping[str, Any], key: str) -> int:
    v = doc.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProtocolError("the answer lacks the integer %r: %r" % (key, dict(doc)))
    return v


def _opt_int(doc: Mapping[str, Any], key: str) -> Optional[int]:
    if doc.get(key) is None:
        return None
    return _int(doc, key)


def _str(doc: Mapping[str, Any], key: str) -> str:
    v = doc.get(key)
    if not isinstance(v, str):
        raise ProtocolError("the answer lacks the string %r: %r" % (key, dict(doc)))
    return v


def _opt_str(doc: Mapping[str, Any], key: str) -> Optional[str]:
    v = doc.get(key)
    if v is not None and not isinstance(v, str):
        raise ProtocolError("%r is not a string: %r" % (key, dict(doc)))
    return v


def _bool(doc: Mapping[str, Any], key: str) -> bool:
    v = doc.get(key)
    if not isinstance(v, bool):
        raise ProtocolError("the answer lacks the boolean %r: %r" % (key, dict(doc)))
    return v


def _validity(ms: int) -> float:
    """A state's validity_ms in seconds; -1 (a key without expiry, set by something other
    than redlockd) is math.inf."""
    return math.inf if ms < 0 else ms / 1000.0


@dataclass(frozen=True)
class Grant:
    """A granted lock.  validity: seconds the service granted; deadline: the
    time.monotonic() until which the holder may assume it holds the lock (counted from
    the request's send).  shared: a read hold (its fencing_token is the name's current
    one: readers do not advance it).  holds: the lease's reentrant hold count (1 for a
    plain grant)."""
    name: str
    lease: str
    fencing_token: int
    validity: float
    ttl: float
    deadline: float
    shared: bool = False
    holds: int = 1

    def remaining(self) -> float:
        """Seconds of validity left (negative once past)."""
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class PermitGrant(Grant):
    """A granted permit of a semaphore of `permits`: its slot (0..permits-1) and a
    fencing token T*1024+slot, larger for every later grant of the name (per slot,
    token % 1024, strictly increasing)."""
    permits: int = 0
    slot: int = 0


@dataclass(frozen=True)
class MultiGrant:
    """A granted set of names (all or nothing), under one lease: each name's fencing
    token, and each name's mode (shared or exclusive)."""
    names: Tuple[str, ...]
    lease: str
    fencing_tokens: Dict[str, int]
    validity: float
    ttl: float
    deadline: float
    modes: Dict[str, str] = field(default_factory=dict)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class Extension:
    """An extended lease: its new validity and deadline (counted from the PATCH's send)."""
    name: str
    fencing_token: int
    validity: float
    ttl: float
    deadline: float


@dataclass(frozen=True)
class Released:
    """A release's answer: released (the lock is free, or handed to a waiter), or, for a
    reentrant lease, the holds it still has (released False); forced for a force-break."""
    name: str
    released: bool
    holds: int = 0
    forced: bool = False


@dataclass(frozen=True)
class MultiReleased:
    """DELETE /locks: the names of the set released."""
    names: Tuple[str, ...]
    released: bool


@dataclass(frozen=True)
class Status:
    """GET /locks/{name}: whether an exclusive holder holds it (held), who (owner, None
    if none was given), how long it surely stays held (validity, s), the latest fencing
    token, the index (opaque, for watching), how many shared holders hold it (readers),
    and, asked with the holder's lease, its reentrant hold count (holds)."""
    name: str
    held: bool
    owner: Optional[str]
    validity: float
    fencing_token: int
    index: str
    readers: int = 0
    holds: Optional[int] = None

    @property
    def shared(self) -> bool:
        """Held by shared holders (readers > 0)."""
        return self.readers > 0


@dataclass(frozen=True)
class SemaphoreStatus:
    """GET /semaphores/{name}: permits held, of how many (permits), and free; permits
    and free are None when no permit was granted within the longest ttl."""
    name: str
    permits: Optional[int]
    held: int
    free: Optional[int]


@dataclass(frozen=True)
class ListedLock:
    """One lock of a listing: as Status shows it (never a lease)."""
    name: str
    owner: Optional[str]
    validity: float
    fencing_token: int


@dataclass(frozen=True)
class LockList:
    """GET /locks: the held locks under `prefix` (the one used: a token's scope may have
    narrowed it), by name; truncated when there were more than the limit, or a master's
    scan stopped before its end."""
    prefix: str
    locks: Tuple[ListedLock, ...]
    truncated: bool


@dataclass(frozen=True)
class MasterHealth:
    """One master as /healthz or /readyz shows it; latency in seconds (None if unknown)."""
    address: str
    ok: bool
    state: str
    latency: Optional[float]
    quarantine_remaining: Optional[float] = None


@dataclass(frozen=True)
class Health:
    """/healthz or /readyz: whether a quorum of masters is usable (ready), the quorum, and
    each master."""
    ready: bool
    quorum: int
    masters: Tuple[MasterHealth, ...]


@dataclass(frozen=True)
class Leader:
    """Who leads an election: the lock's owner (the campaigner's `value`, None if it gave
    none), its fencing token, and how long its lock surely stays held (validity, s)."""
    name: str
    owner: Optional[str]
    fencing_token: int
    validity: float


# -- reading answers --------------------------------------------------------------------
def grant(doc: Mapping[str, Any], sent: float) -> Grant:
    validity = _int(doc, "validity_ms") / 1000.0
    return Grant(name=_str(doc, "name"), lease=_str(doc, "lease"),
                 fencing_token=_int(doc, "fencing_token"), validity=validity,
                 ttl=_int(doc, "ttl_ms") / 1000.0, deadline=sent + validity,
                 shared=doc.get("mode") == "shared", holds=_opt_int(doc, "holds") or 1)


def permit_grant(doc: Mapping[str, Any], sent: float) -> PermitGrant:
    validity = _int(doc, "validity_ms") / 1000.0
    return PermitGrant(name=_str(doc, "name"), lease=_str(doc, "lease"),
                       fencing_token=_int(doc, "fencing_token"), validity=validity,
                       ttl=_int(doc, "ttl_ms") / 1000.0, deadline=sent + validity,
                       permits=_int(doc, "permits"), slot=_int(doc, "slot"))


def multi_grant(doc: Mapping[str, Any], sent: float) -> MultiGrant:
    names = doc.get("names")
    tokens = doc.get("fencing_tokens")
    modes = doc.get("modes") or {}
    if (not isinstance(names, list) or not all(isinstance(n, str) for n in names)
            or not isinstance(tokens, dict) or not isinstance(modes, dict)
            or not all(isinstance(tokens.get(n), int) for n in names)):
        raise ProtocolError("unexpected grant of a set: %r" % dict(doc))
    validity = _int(doc, "validity_ms") / 1000.0
    return MultiGrant(names=tuple(names), lease=_str(doc, "lease"),
                      fencing_tokens={n: tokens[n] for n in names}, validity=validity,
                      ttl=_int(doc, "ttl_ms") / 1000.0, deadline=sent + validity,
                      modes={n: modes.get(n, "exclusive") for n in names})


def extension(doc: Mapping[str, Any], sent: float) -> Extension:
    validity = _int(doc, "validity_ms") / 1000.0
    return Extension(name=_str(doc, "name"), fencing_token=_int(doc, "fencing_token"),
                     validity=validity, ttl=_int(doc, "ttl_ms") / 1000.0,
                     deadline=sent + validity)


def released(doc: Mapping[str, Any], sent: float = 0.0) -> Released:
    done = _bool(doc, "released")
    return Released(name=_str(doc, "name"), released=done,
                    holds=0 if done else (_opt_int(doc, "holds") or 0),
                    forced=doc.get("forced") is True)


def multi_released(doc: Mapping[str, Any], sent: float = 0.0) -> MultiReleased:
    names = doc.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ProtocolError("unexpected release of a set: %r" % dict(doc))
    return MultiReleased(names=tuple(names), released=_bool(doc, "released"))


def status(doc: Mapping[str, Any], sent: float = 0.0) -> Status:
    return Status(name=_str(doc, "name"), held=_bool(doc, "held"),
                  owner=_opt_str(doc, "owner"),
                  validity=_validity(_int(doc, "validity_ms")),
                  fencing_token=_int(doc, "fencing_token"), index=_str(doc, "index"),
                  readers=_opt_int(doc, "readers") or 0, holds=_opt_int(doc, "holds"))


def semaphore_status(doc: Mapping[str, Any], sent: float = 0.0) -> SemaphoreStatus:
    return SemaphoreStatus(name=_str(doc, "name"), permits=_opt_int(doc, "permits"),
                           held=_int(doc, "held"), free=_opt_int(doc, "free"))


def lock_list(doc: Mapping[str, Any], sent: float = 0.0) -> LockList:
    locks = doc.get("locks")
    if not isinstance(locks, list) or not all(isinstance(x, dict) for x in locks):
        raise ProtocolError("unexpected listing: %r" % dict(doc))
    return LockList(prefix=_str(doc, "prefix"),
                    locks=tuple(ListedLock(name=_str(x, "name"), owner=_opt_str(x, "owner"),
                                           validity=_validity(_int(x, "validity_ms")),
                                           fencing_token=_int(x, "fencing_token"))
                                for x in locks),
                    truncated=_bool(doc, "truncated"))


def health(doc: Mapping[str, Any], sent: float = 0.0) -> Health:
    masters = doc.get("masters")
    if not isinstance(masters, list) or not all(isinstance(m, dict) for m in masters):
        raise ProtocolError("unexpected health: %r" % dict(doc))
    out = []
    for m in masters:
        lat = m.get("latency_ms")
        q = m.get("quarantine_remaining_ms")
        out.append(MasterHealth(
            address=_str(m, "address"), ok=_bool(m, "ok"), state=_str(m, "state"),
            latency=lat / 1000.0 if isinstance(lat, (int, float)) else None,
            quarantine_remaining=q / 1000.0 if isinstance(q, (int, float)) else None))
    return Health(ready=_bool(doc, "ready"), quorum=_int(doc, "quorum"), masters=tuple(out))


def leader(st: Status) -> Optional[Leader]:
    """The leader a lock's status shows, None when nobody holds it."""
    if not st.held:
        return None
    return Leader(name=st.name, owner=st.owner, fencing_token=st.fencing_token,
                  validity=st.validity)


__all__ = ["Grant", "PermitGrant", "MultiGrant", "Extension", "Released", "MultiReleased",
           "Status", "SemaphoreStatus", "ListedLock", "LockList", "MasterHealth", "Health",
           "Leader"]
