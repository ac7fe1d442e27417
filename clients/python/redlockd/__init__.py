"""redlockd -- a client of redlockd, the distributed-lock service (standard library only).

    import redlockd
    client = redlockd.Client("http://127.0.0.1:8080", token=None)
    with client.lock("reports", ttl_ms=10000, wait_ms=5000) as lock:
        write_report(fencing_token=lock.fencing_token)   # lock.lost: set if lost
    with client.lock("reports", shared=True) as reader: ...     # a read hold
    with client.semaphore("pool/db", permits=2) as permit: ...  # permit.slot

client.acquire/release/extend/status (and acquire_permit/release_permit/extend_permit/
semaphore_status) are the plain calls; errors are the exceptions of errors.py (LockHeld,
PermitsMismatch, QuorumUnavailable, LeaseLost, Unauthorized, ...)."""
from .client import (Client, Extension, Grant, PermitGrant, SemaphoreStatus, Status,
                     new_lease)
from .errors import (ERRORS, Forbidden, InvalidRequest, LeaseLost, LockContended, LockHeld,
                     PermitsMismatch, ProtocolError, QuorumUnavailable, RedlockError,
                     ServiceUnavailable, ShuttingDown, TooManyStreams, TooManyWaiters,
                     Unauthorized, Unreachable, ValidityExhausted)
from .lock import Lock, Permit

__version__ = "0.1.0"

__all__ = ["Client", "Lock", "Permit", "Grant", "PermitGrant", "Extension", "Status",
           "SemaphoreStatus", "new_lease", "ERRORS",
           "RedlockError", "LockHeld", "LockContended", "PermitsMismatch", "ServiceUnavailable",
           "QuorumUnavailable", "ValidityExhausted", "TooManyWaiters", "TooManyStreams",
           "ShuttingDown", "LeaseLost", "Unauthorized", "Forbidden", "InvalidRequest",
           "ProtocolError", "Unreachable"]
