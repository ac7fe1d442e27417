"""client.py -- Client: the plain calls of the redlockd HTTP API (acquire, release,
extend, status; their semaphore twins acquire_permit, release_permit, extend_permit,
semaphore_status), and client.lock() and client.semaphore(), the held locks of lock.py.

One HTTP connection per call (http.client, standard library only), so a Client may be
shared by threads.  Errors become the exceptions of errors.py."""
from __future__ import annotations

import http.client
import json
import os
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, TypeVar

from .errors import ProtocolError, Unreachable, error_from_reply

if TYPE_CHECKING:
    from .lock import Lock, Permit

DEFAULT_URL = "http://127.0.0.1:8080"
G = TypeVar("G", bound="Grant")


def new_lease() -> str:
    """A fresh lease: 192 bits from the OS CSPRNG, 32 URL-safe characters (the form the
    service itself generates).  The client chooses its leases so that an acquire whose
    answer was lost can be retried: the service answers a POST repeating the lease that
    holds the lock with the same grant."""
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Grant:
    """A granted lock.  validity_ms is what the service said; deadline is the
    time.monotonic() before which the holder may assume it holds the lock, counted from
    when the request was sent (the only moment known to precede the grant).  shared:
    a read hold (its fencing_token is the name's current one: readers do not advance
    it)."""
    name: str
    lease: str
    fencing_token: int
    validity_ms: int
    ttl_ms: int
    deadline: float
    shared: bool = False

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
class Extension:
    """An extended lease: its new validity and deadline (time.monotonic(), counted from
    when the PATCH was sent)."""
    name: str
    fencing_token: int
    validity_ms: int
    ttl_ms: int
    deadline: float


@dataclass(frozen=True)
class Status:
    """GET /locks/{name}: whether a quorum holds the lock exclusively (held), who holds
    it (owner, None if none was given), the latest fencing token, the index (opaque,
    for watching), and how many shared holders hold it (readers)."""
    name: str
    held: bool
    owner: Optional[str]
    validity_ms: int
    fencing_token: int
    index: str
    readers: int = 0


@dataclass(frozen=True)
class SemaphoreStatus:
    """GET /semaphores/{name}: permits held, of how many (permits), and free; permits
    and free are None when no permit was granted within the longest ttl."""
    name: str
    permits: Optional[int]
    held: int
    free: Optional[int]


def _int(body: Dict[str, Any], key: str) -> int:
    v = body.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProtocolError("the answer lacks the integer %r: %r" % (key, body))
    return v


def _str(body: Dict[str, Any], key: str) -> str:
    v = body.get(key)
    if not isinstance(v, str):
        raise ProtocolError("the answer lacks the string %r: %r" % (key, body))
    return v


class Client:
    """A client of one redlockd service.

    url:     the service, e.g. "http://127.0.0.1:8080" (default: $REDLOCK_URL, else that)
    token:   the bearer token (default: $REDLOCK_TOKEN, else none)
    timeout: seconds a call may take beyond any wait_ms it asks for; a call that gets no
             answer within it raises Unreachable
    retries: how many times an acquire that got no answer (Unreachable) is sent again
             with the same lease (an idempotent retry: the service answers the grant the
             first attempt may have made)
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 10.0, retries: int = 2):
        url = url or os.environ.get("REDLOCK_URL") or DEFAULT_URL
        if token is None:
            token = os.environ.get("REDLOCK_TOKEN") or None
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("url must be http://HOST[:PORT] or https://...: %r" % url)
        self.url = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._base = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries

    def __repr__(self) -> str:
        return "Client(%r)" % self.url     # never the token

    # -- HTTP ---------------------------------------------------------------------------
    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _path(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        p = self._base + path
        if query:
            p += "?" + urllib.parse.urlencode(
                {k: v for k, v in query.items() if v is not None})
        return p

    def _headers(self, body: Optional[bytes]) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _open(self, method: str, path: str, body: Optional[Dict[str, Any]],
              timeout: float,
              query: Optional[Dict[str, Any]] = None
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; the connection and the response with its headers read.
        Unreachable when no answer comes within timeout."""
        data = None if body is None else json.dumps(body).encode()
        conn = self._connection(timeout)
        try:
            conn.request(method, self._path(path, query), body=data,
                         headers=self._headers(data))
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Unreachable("%s %s: %s" % (method, self.url + path, e or type(e).__name__))

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
              timeout: Optional[float] = None, query: Optional[Dict[str, Any]] = None,
              ) -> Tuple[int, Dict[str, Any]]:
        """One request; (status, decoded JSON object) for a 2xx, else the error raised."""
        conn, resp = self._open(method, path, body,
                                self.timeout if timeout is None else timeout, query)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable("%s %s: %s" % (method, self.url + path, e or type(e).__name__))
        finally:
            conn.close()
        return resp.status, self._decode(resp.status, raw)

    @staticmethod
    def _decode(status: int, raw: bytes) -> Dict[str, Any]:
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if status // 100 != 2:
            raise error_from_reply(status, doc)
        if not isinstance(doc, dict):
            raise ProtocolError("HTTP %d with a body that is not a JSON object" % status,
                                status=status)
        return doc

    @staticmethod
    def _lock_path(name: str) -> str:
        if not isinstance(name, str) or not name:
            raise ValueError("a lock name is a non-empty string")
        return "/locks/" + urllib.parse.quote(name, safe="/")

    @staticmethod
    def _sem_path(name: str) -> str:
        if not isinstance(name, str) or not name:
            raise ValueError("a semaphore name is a non-empty string")
        return "/semaphores/" + urllib.parse.quote(name, safe="/")

    # -- the calls ----------------------------------------------------------------------
    def acquire(self, name: str, ttl_ms: Optional[int] = None, wait_ms: Optional[int] = None,
                *, lease: Optional[str] = None, owner: Optional[str] = None,
                shared: bool = False) -> Grant:
        """Acquire the lock `name` for ttl_ms (default: the service's, 30 s), waiting up to
        wait_ms for it (default 0: answer at once).  lease: one of your own (16..128 of
        [A-Za-z0-9_-]), e.g. to retry an earlier attempt; by default a new one.  owner:
        who holds it, shown by status() (exclusive holds only).  shared=True takes a read
        hold: any number of readers at once, never beside a writer (release and extend
        it as any grant).  An attempt that gets no answer is retried with the same lease
        (self.retries times), which the service answers with the grant the lost attempt
        made, if it made one.

        Raises LockHeld (retry_after) when another lease holds it, QuorumUnavailable (or
        another ServiceUnavailable), Unauthorized, InvalidRequest, Unreachable."""
        body = self._acquire_body(ttl_ms, wait_ms, lease or new_lease(), owner, shared)
        return self._acquire_at(self._lock_path(name), body, wait_ms, self._grant)

    def acquire_permit(self, name: str, permits: int, ttl_ms: Optional[int] = None,
                       wait_ms: Optional[int] = None, *, lease: Optional[str] = None,
                       owner: Optional[str] = None) -> PermitGrant:
        """Take one of the `permits` permits (1..1024) of the semaphore `name`: at most
        that many holders at once.  Every caller of a name must use the same number
        (PermitsMismatch, with the number in use, otherwise).  LockHeld when every permit
        is taken (after waiting up to wait_ms); the rest as acquire()."""
        body = self._acquire_body(ttl_ms, wait_ms, lease or new_lease(), owner)
        body["permits"] = permits
        return self._acquire_at(self._sem_path(name), body, wait_ms, self._permit_grant)

    def _acquire_at(self, path: str, body: Dict[str, Any], wait_ms: Optional[int],
                    parse: Callable[[Dict[str, Any], float], G]) -> G:
        timeout = self.timeout + (wait_ms or 0) / 1000.0
        attempt = 0
        while True:
            sent = time.monotonic()
            try:
                _, doc = self._call("POST", path, body, timeout)
                return parse(doc, sent)
            except Unreachable:
                attempt += 1
                if attempt > self.retries:
                    raise

    @staticmethod
    def _acquire_body(ttl_ms: Optional[int], wait_ms: Optional[int], lease: str,
                      owner: Optional[str], shared: bool = False) -> Dict[str, Any]:
        body: Dict[str, Any] = {"lease": lease}
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        if wait_ms is not None:
            body["wait_ms"] = wait_ms
        if owner is not None:
            body["owner"] = owner
        if shared:
            body["mode"] = "shared"
        return body

    @staticmethod
    def _grant(doc: Dict[str, Any], sent: float) -> Grant:
        validity = _int(doc, "validity_ms")
        return Grant(name=_str(doc, "name"), lease=_str(doc, "lease"),
                     fencing_token=_int(doc, "fencing_token"), validity_ms=validity,
                     ttl_ms=_int(doc, "ttl_ms"), deadline=sent + validity / 1000.0,
                     shared=doc.get("mode") == "shared")

    @staticmethod
    def _permit_grant(doc: Dict[str, Any], sent: float) -> PermitGrant:
        validity = _int(doc, "validity_ms")
        return PermitGrant(name=_str(doc, "name"), lease=_str(doc, "lease"),
                           fencing_token=_int(doc, "fencing_token"), validity_ms=validity,
                           ttl_ms=_int(doc, "ttl_ms"), deadline=sent + validity / 1000.0,
                           permits=_int(doc, "permits"), slot=_int(doc, "slot"))

    def release(self, name: str, lease: str) -> None:
        """Release the lock `name` held by lease (an exclusive or a shared hold).  Raises
        LeaseLost when the lease no longer holds it (expired, released or lost),
        ServiceUnavailable, Unreachable."""
        self._call("DELETE", self._lock_path(name), {"lease": lease})

    def release_permit(self, name: str, lease: str) -> None:
        """Give back the permit of the semaphore `name` that lease holds; as release()."""
        self._call("DELETE", self._sem_path(name), {"lease": lease})

    def extend(self, name: str, lease: str, ttl_ms: Optional[int] = None, *,
               timeout: Optional[float] = None) -> Extension:
        """Extend the lock `name` held by lease (exclusive or shared) to ttl_ms from now
        (default: the service's default ttl); timeout: seconds to wait for the answer
        (default self.timeout).  Raises LeaseLost when the lease no longer holds it,
        ServiceUnavailable (e.g. QuorumUnavailable: the lease may still hold until its
        validity ends), Unreachable."""
        return self._extend_at(self._lock_path(name), lease, ttl_ms, timeout)

    def extend_permit(self, name: str, lease: str, ttl_ms: Optional[int] = None, *,
                      timeout: Optional[float] = None) -> Extension:
        """Extend the permit of the semaphore `name` that lease holds; as extend() (the
        answer's fencing_token is the semaphore's counter on the permit's slot)."""
        return self._extend_at(self._sem_path(name), lease, ttl_ms, timeout)

    def _extend_at(self, path: str, lease: str, ttl_ms: Optional[int],
                   timeout: Optional[float]) -> Extension:
        body: Dict[str, Any] = {"lease": lease}
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        sent = time.monotonic()
        _, doc = self._call("PATCH", path, body, timeout)
        validity = _int(doc, "validity_ms")
        return Extension(name=_str(doc, "name"), fencing_token=_int(doc, "fencing_token"),
                         validity_ms=validity, ttl_ms=_int(doc, "ttl_ms"),
                         deadline=sent + validity / 1000.0)

    def status(self, name: str, *, index: Optional[str] = None,
               wait_ms: Optional[int] = None) -> Status:
        """The lock's state (never its lease).  With index (from an earlier Status) and
        wait_ms, a watch: answers as soon as the index is no longer that one, or after
        wait_ms with the same index."""
        timeout = self.timeout + (wait_ms or 0) / 1000.0
        _, doc = self._call("GET", self._lock_path(name), None, timeout,
                            query={"index": index, "wait_ms": wait_ms})
        owner = doc.get("owner")
        held = doc.get("held")
        if not isinstance(held, bool) or not (owner is None or isinstance(owner, str)):
            raise ProtocolError("unexpected lock state: %r" % doc)
        return Status(name=_str(doc, "name"), held=held, owner=owner,
                      validity_ms=_int(doc, "validity_ms"),
                      fencing_token=_int(doc, "fencing_token"), index=_str(doc, "index"),
                      readers=_int(doc, "readers") if "readers" in doc else 0)

    def semaphore_status(self, name: str) -> SemaphoreStatus:
        """The semaphore's permits held and free (never a lease)."""
        _, doc = self._call("GET", self._sem_path(name))
        permits, free = doc.get("permits"), doc.get("free")
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                   for v in (permits, free)):
            raise ProtocolError("unexpected semaphore state: %r" % doc)
        return SemaphoreStatus(name=_str(doc, "name"), permits=permits,
                               held=_int(doc, "held"), free=free)

    def lock(self, name: str, ttl_ms: int = 30000, wait_ms: Optional[int] = None, *,
             owner: Optional[str] = None, lease: Optional[str] = None,
             keepalive: str = "stream", shared: bool = False) -> "Lock":
        """A lock to hold in a `with` block (or by acquire()/release()):

            with client.lock("reports", ttl_ms=10000, wait_ms=5000) as lock:
                write(report, fencing_token=lock.fencing_token)

        kept alive while held, by the service (keepalive="stream": hold=stream, the lock
        lives as long as the connection) or by a thread of ours extending it every ttl/3
        (keepalive="extend").  lock.lost (a threading.Event) is set if it is lost;
        leaving the block releases it, and raises LeaseLost if it was lost meanwhile.
        shared=True: a read hold, beside any number of other readers."""
        from .lock import Lock
        return Lock(self, name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner, lease=lease,
                    keepalive=keepalive, shared=shared)

    def semaphore(self, name: str, permits: int, ttl_ms: int = 30000,
                  wait_ms: Optional[int] = None, *, owner: Optional[str] = None,
                  lease: Optional[str] = None) -> "Permit":
        """A permit of the semaphore `name` (of `permits`) to hold in a `with` block:

            with client.semaphore("pool/db", permits=2, wait_ms=5000) as permit:
                use(slot=permit.slot, fencing_token=permit.fencing_token)

        kept alive by a thread of ours extending it every ttl/3, with permit.lost set if
        it is lost, released when the block ends -- as client.lock(keepalive="extend")."""
        from .lock import Permit
        return Permit(self, name, permits, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner,
                      lease=lease)


__all__ = ["Client", "Grant", "PermitGrant", "Extension", "Status", "SemaphoreStatus",
           "new_lease"]
