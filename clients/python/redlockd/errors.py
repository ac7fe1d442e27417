"""errors.py -- the service's error codes (api/openapi.yaml's Error enum), one table, and
the exceptions they become.

Every error the service answers is {"error": "<code>", "message": "<text>"}; ERRORS maps
each code to the exception raised for it.  Catch by meaning:

    RedlockError                 every error of this package (.code, .status, .message)
      LockHeld                   409 lock_held: another lease holds it (.retry_after, s)
        LockContended            409 lock_contended: votes split, nobody holds it
      ServiceUnavailable         503: retry later or elsewhere
        QuorumUnavailable        quorum_unavailable (.nodes_ok, .quorum)
          MastersQuarantined     masters_quarantined: too few masters trusted (.quarantined,
                                 .rejoin, s)
          ReleaseUnconfirmed     release_unconfirmed: masters that did not answer may still
                                 hold it; the service finishes the release
        ValidityExhausted, TooManyWaiters, TooManyStreams, ShuttingDown
      PermitsMismatch            409 permits_mismatch: the semaphore is in use with another
                                 number of permits (.permits, the one in use)
      LeaseLost                  404 lease_not_found, or a held lock was lost
      Unauthorized               401 unauthorized
        Forbidden                403 forbidden (a valid token, not for this name/action)
      InvalidRequest             400 invalid_* (a bug in the call: bad name, ttl, lease...)
      ProtocolError              404 not_found, 405, 413, 500, an unknown code or a reply
                                 that is not the API's
      Unreachable                no answer: connection refused or reset, or the call's
                                 whole deadline (connect, send and receive) passed
"""
from __future__ import annotations

from typing import Any, Dict, Optional


class RedlockError(Exception):
    """Base of every error raised by this package.  code is the service's error code
    (None when the service did not answer), status the HTTP status (0 without one),
    body the decoded error body ({} without one)."""

    def __init__(self, message: str, code: Optional[str] = None, status: int = 0,
                 body: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.body = body or {}

    def __str__(self) -> str:
        if self.code:
            return "%s (HTTP %d %s)" % (self.message, self.status, self.code)
        return self.message


class LockHeld(RedlockError):
    """The lock is held by another lease (after waiting up to `wait`, if given).
    retry_after: seconds (float) until the holder's lock should expire, None if the
    service did not say."""

    def __init__(self, message: str, code: Optional[str] = "lock_held", status: int = 409,
                 body: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, status, body)
        ms = self.body.get("retry_after_ms")
        self.retry_after: Optional[float] = (
            ms / 1000.0 if isinstance(ms, int) and not isinstance(ms, bool) else None)


class LockContended(LockHeld):
    """Nobody holds a quorum, but concurrent attempts kept splitting the votes; retrying
    after retry_after is expected to succeed."""


class PermitsMismatch(RedlockError):
    """The semaphore is in use with another number of permits: every caller of a name
    must use the same.  permits is the number in use (the service's answer).  Not a
    LockHeld: waiting does not help while holders use the other number."""

    def __init__(self, message: str, code: Optional[str] = "permits_mismatch",
                 status: int = 409, body: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, status, body)
        n = self.body.get("permits")
        self.permits: Optional[int] = n if isinstance(n, int) else None


class ServiceUnavailable(RedlockError):
    """503: the service cannot answer this now; retry later (or on another instance)."""


class QuorumUnavailable(ServiceUnavailable):
    """Fewer than a quorum of masters answered in time (nodes_ok of quorum)."""

    def __init__(self, message: str, code: Optional[str] = "quorum_unavailable",
                 status: int = 503, body: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, status, body)
        self.nodes_ok: Optional[int] = self.body.get("nodes_ok")
        self.quorum: Optional[int] = self.body.get("quorum")


class MastersQuarantined(QuorumUnavailable):
    """503 masters_quarantined: fewer than a quorum of masters are trusted; the others sit
    out a restart, a loss of data or a clock that misbehaved.  quarantined: how many;
    rejoin: seconds (float) until the first is due back, None when each waits for its
    peers (nodes_ok and quorum as QuorumUnavailable)."""

    def __init__(self, message: str, code: Optional[str] = "masters_quarantined",
                 status: int = 503, body: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, status, body)
        self.quarantined: Optional[int] = self.body.get("quarantined")
        ms = self.body.get("rejoin_ms")
        self.rejoin: Optional[float] = (
            ms / 1000.0 if isinstance(ms, int) and not isinstance(ms, bool) else None)


class ReleaseUnconfirmed(QuorumUnavailable):
    """503 release_unconfirmed (to a release): masters that did not answer may still hold
    the lock for this lease, so the service cannot say it is free; it goes on releasing it
    there by itself, until the lock's ttl ends.  Stop using the resource as after any
    release; do not count on the lock being free for others before its ttl ends.  A plain
    lock may be released again later (which answers released or LeaseLost); a reentrant
    one must not (each release takes a hold back).  A QuorumUnavailable (nodes_ok,
    quorum), as main's table had it."""

    def __init__(self, message: str, code: Optional[str] = "release_unconfirmed",
                 status: int = 503, body: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, status, body)


class ValidityExhausted(ServiceUnavailable):
    """A quorum granted, but the round took longer than the ttl allows (released again)."""


class TooManyWaiters(ServiceUnavailable):
    """The instance already parks its maximum of waiting acquirers."""


class TooManyStreams(ServiceUnavailable):
    """The instance already holds its maximum of streamed locks."""


class ShuttingDown(ServiceUnavailable):
    """The instance is stopping; retry on another."""


class LeaseLost(RedlockError):
    """The lease no longer holds the lock: the service answered lease_not_found, or a
    held lock (Lock, Permit, LockSet, a leadership) was lost (its `lost` is set)."""


class Unauthorized(RedlockError):
    """401: no token, or not one the service knows."""


class Forbidden(Unauthorized):
    """403: the token is valid but not for this name (its prefix) or this action."""


class InvalidRequest(RedlockError):
    """400: the request was refused as malformed (name, ttl, wait, lease, owner, mode,
    permits, query...)."""


class ProtocolError(RedlockError):
    """An answer this client does not expect: no such route, a method not allowed, a
    body too large, an internal error of the service, or a reply that is not the API's."""


class Unreachable(RedlockError):
    """No answer from the service: the connection failed or was reset, or the call's
    whole deadline (name lookup, connect, TLS, send and receive together) passed."""


# The service's error codes, exactly api/openapi.yaml's components.schemas.Error enum (the
# tests check that the two agree), and the exception each one raises.
ERRORS: Dict[str, type] = {
    "invalid_json": InvalidRequest,
    "invalid_name": InvalidRequest,
    "invalid_ttl": InvalidRequest,
    "invalid_wait": InvalidRequest,
    "invalid_lease": InvalidRequest,
    "invalid_hold": InvalidRequest,
    "invalid_index": InvalidRequest,
    "invalid_owner": InvalidRequest,
    "invalid_limit": InvalidRequest,
    "invalid_force": InvalidRequest,
    "invalid_mode": InvalidRequest,
    "invalid_permits": InvalidRequest,
    "invalid_reentrant": InvalidRequest,
    "invalid_query": InvalidRequest,
    "invalid_lock_delay": InvalidRequest,
    "invalid_max_hold": InvalidRequest,
    "invalid_token": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": ProtocolError,
    "lease_not_found": LeaseLost,
    "method_not_allowed": ProtocolError,
    "lock_held": LockHeld,
    "lock_contended": LockContended,
    "permits_mismatch": PermitsMismatch,
    "max_hold_exceeded": LeaseLost,   # the hold is at its max_hold_ms: it cannot be kept
    "body_too_large": ProtocolError,
    "client_closed": ProtocolError,
    "internal": ProtocolError,
    "quorum_unavailable": QuorumUnavailable,
    "masters_quarantined": MastersQuarantined,
    "validity_exhausted": ValidityExhausted,
    "too_many_waiters": TooManyWaiters,
    "too_many_streams": TooManyStreams,
    "shutting_down": ShuttingDown,
    "release_unconfirmed": ReleaseUnconfirmed,
}


def error_from_reply(status: int, body: Any) -> RedlockError:
    """The exception for an error answer (status, decoded JSON body or None)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code = body["error"]
        message = body.get("message") if isinstance(body.get("message"), str) else code
        cls = ERRORS.get(code)
        if cls is None:   # a code newer than this client: judge by the status
            cls = {401: Unauthorized, 403: Forbidden, 409: LockHeld,
                   503: ServiceUnavailable}.get(status, ProtocolError)
            if status == 400:
                cls = InvalidRequest
        return cls(message, code=code, status=status, body=body)
    return ProtocolError("unexpected answer: HTTP %d" % status, status=status)
