"""redlockd -- a client of redlockd, the distributed-lock service (standard library only).

    import redlockd
    client = redlockd.Client("http://127.0.0.1:8080", token=None)
    with client.lock("reports", ttl_ms=10000, wait_ms=5000) as lock:
        write_report(fencing_token=lock.fencing_token)   # lock.lost: set if lost

client.acquire/release/extend/status are the plain calls; errors are the exceptions of
errors.py (LockHeld, QuorumUnavailable, LeaseLost, Unauthorized, ...)."""
from .client import Client, Extension, Grant, Status, new_lease
from .errors import (ERRORS, Forbidden, InvalidRequest, LeaseLost, LockContended, LockHeld,
                     ProtocolError, QuorumUnavailable, RedlockError, ServiceUnavailable,
                     ShuttingDown, TooManyStreams, TooManyWaiters, Unauthorized,
                     Unreachable, ValidityExhausted)
from .lock import Lock

__version__ = "0.1.0"

__all__ = ["Client", "Lock", "Grant", "Extension", "Status", "new_lease", "ERRORS",
           "RedlockError", "LockHeld", "LockContended", "ServiceUnavailable",
           "QuorumUnavailable", "ValidityExhausted", "TooManyWaiters", "TooManyStreams",
           "ShuttingDown", "LeaseLost", "Unauthorized", "Forbidden", "InvalidRequest",
           "ProtocolError", "Unreachable"]
