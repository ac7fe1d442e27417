"""redlockd -- a client of redlockd, the distributed-lock service (standard library only).

    import redlockd
    client = redlockd.Client()          # $REDLOCK_URL (default http://127.0.0.1:8080)
    with client.lock("reports", ttl=10, wait=5) as lock:
        write_report(fencing_token=lock.fencing_token)   # lock.lost: set if lost
    with client.lock("reports", shared=True) as reader: ...      # a read hold
    with client.semaphore("pool/db", permits=2) as permit: ...   # permit.slot
    with client.locks(["a", "b"]) as both: ...                   # all or nothing
    with client.election("scheduler", value="me") as e: ...      # leading here

The asyncio client is redlockd.aio.AsyncClient: the same methods and held forms, with
`await` and `async with`.  Durations are seconds (float, or datetime.timedelta).  Errors
are the exceptions of errors.py (LockHeld, PermitsMismatch, QuorumUnavailable,
LeaseLost, Unauthorized, Unreachable, ...)."""
from ._proto import DEFAULT_URL, loss_margin, new_lease
from ._version import __version__
from .client import Client
from .election import Election
from .errors import (ERRORS, Forbidden, InvalidRequest, LeaseLost, LockContended, LockHeld,
                     MastersQuarantined, PermitsMismatch, ProtocolError, QuorumUnavailable,
                     RedlockError, ReleaseUnconfirmed, ServiceUnavailable, ShuttingDown,
                     TooManyStreams, TooManyWaiters, Unauthorized, Unreachable,
                     ValidityExhausted)
from .lock import Lock, LockSet, Permit
from .models import (Extension, Grant, Health, Leader, ListedLock, LockList, MasterHealth,
                     MultiGrant, MultiReleased, PermitGrant, Released, SemaphoreStatus,
                     Status)

__all__ = ["Client", "Lock", "Permit", "LockSet", "Election", "new_lease", "loss_margin",
           "DEFAULT_URL", "__version__",
           "Grant", "PermitGrant", "MultiGrant", "Extension", "Released", "MultiReleased",
           "Status", "SemaphoreStatus", "ListedLock", "LockList", "Health", "MasterHealth",
           "Leader", "ERRORS",
           "RedlockError", "LockHeld", "LockContended", "PermitsMismatch", "ServiceUnavailable",
           "QuorumUnavailable", "MastersQuarantined", "ReleaseUnconfirmed", "ValidityExhausted",
           "TooManyWaiters", "TooManyStreams", "ShuttingDown", "LeaseLost", "Unauthorized",
           "Forbidden", "InvalidRequest", "ProtocolError", "Unreachable"]
