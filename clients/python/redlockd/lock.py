"""lock.py -- Lock: a lock (exclusive or shared) held in a `with` block and kept alive
while held, by the service (hold=stream) or by an extend thread, with `lost` set the
moment it may no longer be held; Permit: the same for a permit of a semaphore.

The holder may assume it holds the lock until `deadline` (time.monotonic()): each
validity the service announces is counted from a moment known to precede it (the
request sent, or the read that brought the line begun), so a slow reader never stretches
it.  The lock is lost -- `lost` set, `lost_reason` saying why -- when the service says
so (a `lost` line, lease_not_found), when the stream ends or its connection fails, when
someone else releases the lease, or a margin before the deadline with no new validity
(a tenth of the ttl, 10 ms..1 s, as the service's own streamed hold does), so that code
watching `lost` has that long to stop before the validity ends."""
from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any, Dict, Optional, TypeVar

from .client import Client, Grant, PermitGrant, new_lease
from .errors import (LeaseLost, ProtocolError, RedlockError, ServiceUnavailable,
                     Unreachable)

KEEPALIVES = ("stream", "extend")
L = TypeVar("L", bound="Lock")


def loss_margin(ttl_ms: int) -> float:
    """Seconds before the deadline at which a lock not extended since is called lost."""
    return min(max(ttl_ms / 10.0, 10.0), 1000.0) / 1000.0


class Lock:
    """See Client.lock().  Attributes once acquired: name, lease, fencing_token,
    validity_ms (the grant's), ttl_ms, deadline, lost (threading.Event), lost_reason;
    shared says whether it is a read hold."""

    def __init__(self, client: Client, name: str, *, ttl_ms: int = 30000,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 shared: bool = False):
        if keepalive not in KEEPALIVES:
            raise ValueError("keepalive must be one of %s" % (KEEPALIVES,))
        if not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise ValueError("ttl_ms must be a positive integer")
        self.client = client
        self.name = name
        self.ttl_ms = ttl_ms
        self.wait_ms = wait_ms
        self.owner = owner
        self.keepalive = keepalive
        self.shared = shared
        self._lease = lease
        self.grant: Optional[Grant] = None
        self.deadline = 0.0
        self._margin = loss_margin(ttl_ms)
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        self._lease_gone = False       # the service said so: nothing to release
        self._stop = threading.Event()  # we are releasing: the end is not a loss
        # The DELETE went (or was not needed): only then may the reader close the
        # stream, since closing it releases the lock too and would race the DELETE.
        self._released = threading.Event()
        self._mu = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._conn: Optional[http.client.HTTPConnection] = None
        self._resp: Optional[http.client.HTTPResponse] = None

    def __repr__(self) -> str:
        state = ("lost" if self.lost.is_set() else "held") if self.grant else "not held"
        return "<%s %r %s>" % (type(self).__name__, self.name, state)   # never the lease

    # -- what it is a hold of: a lock (Permit overrides these for a semaphore) ------------
    def _path(self) -> str:
        return self.client._lock_path(self.name)

    def _body(self, lease: str) -> Dict[str, Any]:
        return self.client._acquire_body(self.ttl_ms, self.wait_ms, lease, self.owner,
                                         self.shared)

    def _parse(self, doc: Dict[str, Any], sent: float) -> Grant:
        return self.client._grant(doc, sent)

    # -- what the grant said --------------------------------------------------------------
    def _granted(self) -> Grant:
        if self.grant is None:
            raise RuntimeError("the lock %r has not been acquired" % self.name)
        return self.grant

    @property
    def lease(self) -> str:
        return self._granted().lease

    @property
    def fencing_token(self) -> int:
        return self._granted().fencing_token

    @property
    def validity_ms(self) -> int:
        return self._granted().validity_ms

    def remaining(self) -> float:
        """Seconds the holder may still assume it holds the lock (<= 0: not any more)."""
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise LeaseLost unless the lock is still held (not lost, deadline ahead)."""
        self._granted()
        if self.lost.is_set():
            raise LeaseLost("lost the lock %r: %s" % (self.name, self.lost_reason))
        if self.remaining() <= 0:
            raise LeaseLost("the lock %r: its validity ran out" % self.name)

    # -- acquire --------------------------------------------------------------------------
    def __enter__(self: L) -> L:
        return self.acquire()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            self.release()
        except RedlockError:
            if exc_type is None:
                raise
        return False

    def acquire(self: L) -> L:
        """Acquire the lock (waiting up to wait_ms) and start keeping it alive; returns
        self.  Raises what Client.acquire raises."""
        if self.grant is not None or self._stop.is_set():
            raise RuntimeError("a Lock is acquired once (the lock %r: make another with "
                               "client.lock())" % self.name)
        lease = self._lease or new_lease()
        if self.keepalive == "stream":
            grant = self._open_stream(lease)
        else:
            grant = self.client._acquire_at(self._path(), self._body(lease), self.wait_ms,
                                            self._parse)
        self.grant = grant
        self.deadline = grant.deadline
        try:
            # A grant that came after a long wait may have little validity left counted
            # from the request: confirm it with an extension before handing it out.
            if self.remaining() < grant.validity_ms / 2000.0:
                ext = self.client._extend_at(self._path(), grant.lease, self.ttl_ms,
                                             max(0.001, min(self.client.timeout,
                                                            self.remaining())))
                self.deadline = ext.deadline
            target = self._read_stream if self.keepalive == "stream" else self._extend_loop
            self._thread = threading.Thread(target=target, daemon=True,
                                            name="redlockd-lock-%s" % self.name)
            self._thread.start()
        except BaseException:
            self._stop.set()
            self._released.set()
            self._close_stream()
            try:
                self.client._call("DELETE", self._path(), {"lease": grant.lease})
            except RedlockError:
                pass
            self.grant = None
            raise
        return self

    def _open_stream(self, lease: str) -> Grant:
        """POST hold=stream (retried with the same lease when no answer came); the grant
        from the first line, the connection kept open in self._conn/_resp."""
        c = self.client
        body = self._body(lease)
        body["hold"] = "stream"
        path = self._path()
        timeout = c.timeout + (self.wait_ms or 0) / 1000.0
        attempt = 0
        while True:
            sent = time.monotonic()
            try:
                conn, resp = c._open("POST", path, body, timeout)
            except Unreachable:
                attempt += 1
                if attempt > c.retries:
                    raise
                continue
            try:
                if resp.status != 201:
                    c._decode(resp.status, resp.read())   # raises the error answered
                    raise ProtocolError("HTTP %d to a streamed acquire" % resp.status,
                                        status=resp.status)
                line = resp.readline()
                try:
                    doc = json.loads(line)
                except ValueError:
                    doc = None
                if not isinstance(doc, dict):
                    raise ProtocolError("a streamed grant that is not a JSON line: %r"
                                        % line[:200])
                grant = self._parse(doc, sent)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                attempt += 1
                if attempt > c.retries:
                    raise Unreachable("POST %s: %s" % (c.url + path, e or type(e).__name__))
                continue
            except BaseException:
                conn.close()
                raise
            self._conn, self._resp = conn, resp
            return grant

    # -- keeping it -----------------------------------------------------------------------
    def _lose(self, reason: str, lease_gone: bool = False) -> None:
        with self._mu:
            if self._stop.is_set() or self.lost.is_set():
                return
            self.lost_reason = reason
            self._lease_gone = lease_gone
            self.lost.set()

    def _read_stream(self) -> None:
        """The stream's reader: each line moves the deadline or ends the hold."""
        conn, resp = self._conn, self._resp
        assert conn is not None and resp is not None
        while not self._stop.is_set():
            t0 = time.monotonic()
            left = self.deadline - self._margin - t0
            if left <= 0:
                self._lose("the validity ran out with no word from the service")
                break
            try:
                if conn.sock is None:
                    break
                conn.sock.settimeout(left)
                line = resp.readline()
            except socket.timeout:
                self._lose("the validity ran out with no word from the service")
                break
            except Exception as e:   # OSError, HTTPException, or http.client's state
                # after release() shut the socket down under this read
                self._lose("the stream failed: %s" % (e or type(e).__name__))
                break
            if not line:
                self._lose("the stream ended")
                break
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
            event = ev.get("event") if isinstance(ev, dict) else None
            if event == "extended" and isinstance(ev.get("validity_ms"), int):
                self.deadline = t0 + ev["validity_ms"] / 1000.0
            elif event == "lost":
                self._lose("the service could not keep it (lost: %s)" % ev.get("reason"),
                           lease_gone=ev.get("reason") == "lease_lost")
                break
            elif event == "released":
                self._lose("released by someone else%s" % (
                    " (%s)" % ev["reason"] if ev.get("reason") else ""), lease_gone=True)
                break
            else:
                self._lose("an unexpected line in the stream: %r" % line[:200])
                break
        if self._stop.is_set():
            # Releasing: the stream closes after the DELETE (release() sets _released),
            # never before it, or the service would release the lock on the hang-up
            # and the DELETE would find it gone (a false "lost").
            self._released.wait(max(self.client.timeout, 1.0))
        conn.close()

    def _extend_loop(self) -> None:
        """The extend thread: PATCH every ttl/3, again soon after a failure, until the
        deadline."""
        period = self.ttl_ms / 3000.0
        retry = min(0.1, period / 4)
        next_at = time.monotonic() + period
        while True:
            lose_at = self.deadline - self._margin
            if self._stop.wait(max(0.0, min(next_at, lose_at) - time.monotonic())):
                return
            now = time.monotonic()
            if now >= lose_at:
                self._lose("the validity ran out with no successful extension")
                return
            try:
                ext = self.client._extend_at(self._path(), self.lease, self.ttl_ms,
                                             max(0.001, min(self.client.timeout,
                                                            lose_at - now)))
            except LeaseLost as e:
                self._lose("the lease is gone (%s)" % e.message, lease_gone=True)
                return
            except (ServiceUnavailable, Unreachable):
                next_at = time.monotonic() + retry
                continue
            except RedlockError as e:
                self._lose("extending failed: %s" % e)
                return
            if not self._stop.is_set():
                self.deadline = ext.deadline
            next_at = now + period

    def _close_stream(self) -> None:
        """End the stream's connection (the service then releases the lock, if it still
        holds it for us).  Only the socket is shut down while the reader runs: the
        reader, woken by it, closes the connection itself."""
        conn = self._conn
        if conn is None:
            return
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is None:
            conn.close()

    # -- release --------------------------------------------------------------------------
    def release(self) -> None:
        """Release the lock (a DELETE with the lease; with keepalive="stream" the
        connection is closed too, which releases it as well).  A no-op when not held.
        Raises LeaseLost if the lock was lost while held.  With keepalive="extend" an
        error of the DELETE is raised (the lease then lasts until its ttl ends)."""
        if self.grant is None or self._stop.is_set():
            return
        with self._mu:
            self._stop.set()
        error: Optional[RedlockError] = None
        if not self._lease_gone:
            try:
                self.client._call("DELETE", self._path(), {"lease": self.grant.lease})
            except LeaseLost as e:
                if not self.lost.is_set():
                    self.lost_reason = "the lease was gone at release (%s)" % e.message
                    self.lost.set()
            except RedlockError as e:
                # stream: closing the connection releases it; lost: nothing to keep.
                if self.keepalive == "extend" and not self.lost.is_set():
                    error = e
        self._released.set()
        self._close_stream()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(self.client.timeout, 1.0))
        if self.lost.is_set():
            raise LeaseLost("lost the lock %r while holding it: %s"
                            % (self.name, self.lost_reason))
        if error is not None:
            raise error


class Permit(Lock):
    """See Client.semaphore(): a permit of the semaphore `name` (of `permits`), held as a
    Lock with keepalive="extend" is.  Once acquired also: slot (0..permits-1), permits;
    fencing_token is the permit's (T*1024+slot).

    Kept by extensions (PATCH /semaphores/{name}) rather than a stream: this service's
    streamed hold of a permit ends at once (its keep-alive extends the name as a lock),
    see the README."""

    def __init__(self, client: Client, name: str, permits: int, *, ttl_ms: int = 30000,
                 wait_ms: Optional[int] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None):
        if not isinstance(permits, int) or isinstance(permits, bool) or permits < 1:
            raise ValueError("permits must be a positive integer")
        super().__init__(client, name, ttl_ms=ttl_ms, wait_ms=wait_ms, owner=owner,
                         lease=lease, keepalive="extend")
        self.permits = permits

    def _path(self) -> str:
        return self.client._sem_path(self.name)

    def _body(self, lease: str) -> Dict[str, Any]:
        body = self.client._acquire_body(self.ttl_ms, self.wait_ms, lease, self.owner)
        body["permits"] = self.permits
        return body

    def _parse(self, doc: Dict[str, Any], sent: float) -> PermitGrant:
        return self.client._permit_grant(doc, sent)

    @property
    def slot(self) -> int:
        grant = self._granted()
        assert isinstance(grant, PermitGrant)
        return grant.slot
