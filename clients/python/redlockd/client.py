"""client.py -- Client, the blocking client: every operation of the redlockd HTTP API as a
method (durations in seconds, float or timedelta), and the held forms of lock.py and
election.py (client.lock(), semaphore(), locks(), election()).

A Client keeps a pool of keep-alive connections and may be shared by threads.  Every call
has one deadline for all of it -- name lookup, connect, TLS, send and receive -- `timeout`
seconds plus whatever wait it asks the service for.  Errors are the exceptions of
errors.py."""
from __future__ import annotations

import os
import ssl
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from . import _proto, models
from ._http import Transport
from ._proto import Call, Endpoint, Seconds, new_lease
from .election import Election
from .errors import Unreachable
from .lock import Lock, LockSet, Permit


class Client:
    """A client of one redlockd service.

    url:          the service (default: $REDLOCK_URL, else http://127.0.0.1:8080)
    token:        the bearer token (default: $REDLOCK_TOKEN, else none)
    timeout:      seconds a call may take in all (beyond any wait it asks the service
                  for); past it the call raises Unreachable
    retries:      how many times a call that got no answer (Unreachable) is sent again:
                  acquires with the same lease (the service answers the grant an
                  unanswered attempt made, if it made one), and reads
    ca_file:      a PEM file of CA certificates to verify an https:// service with
    ssl_context:  an ssl.SSLContext to use instead (client certificates, pinning...)
    pool_size:    idle keep-alive connections kept for reuse
    idle_timeout: seconds an idle connection is kept (below the service's keep-alive
                  limit, --header-timeout-ms, 15 s by default)
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: Seconds = 10.0, retries: int = 2, ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, pool_size: int = 8,
                 idle_timeout: Seconds = 10.0):
        ep = Endpoint.parse(url)
        if token is None:
            token = os.environ.get("REDLOCK_TOKEN") or None
        if (ca_file or ssl_context) and not ep.https:
            raise ValueError("ca_file and ssl_context are for an https:// service")
        if ca_file and ssl_context:
            raise ValueError("give ca_file or ssl_context, not both")
        if ca_file:
            ssl_context = ssl.create_default_context(cafile=ca_file)
        self.timeout = _proto.seconds(timeout, "timeout")
        self.retries = retries
        self.transport = Transport(ep, _proto.check_token(token), ssl_context, pool_size,
                                   _proto.seconds(idle_timeout, "idle_timeout"))

    @property
    def url(self) -> str:
        return self.transport.ep.url

    @property
    def token(self) -> Optional[str]:
        return self.transport.token

    def __repr__(self) -> str:
        return "Client(%r)" % self.url     # never the token

    def close(self) -> None:
        """Close the idle connections (the Client stays usable)."""
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def execute(self, call: Call, *, timeout: Optional[float] = None,
                retries: int = 0) -> Any:
        """Run one Call of _proto (what every method here does): its deadline is
        `timeout` (default self.timeout) plus the wait it asks for; sent again up to
        `retries` times when it got no answer."""
        attempt = 0
        while True:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout) \
                + call.wait
            try:
                status, raw, sent = self.transport.exchange(call, deadline)
            except Unreachable:
                attempt += 1
                if attempt > retries:
                    raise
                continue
            return _proto.answer(call, status, raw, sent)

    # -- locks --------------------------------------------------------------------------------
    def acquire(self, name: str, ttl: Optional[Seconds] = None,
                wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                owner: Optional[str] = None, shared: bool = False,
                reentrant: bool = False) -> models.Grant:
        """Acquire the lock `name` for ttl seconds (default: the service's, 30 s), waiting
        up to `wait` seconds for it (default 0: answer at once).  lease: one of your own
        (16..128 of [A-Za-z0-9_-]), e.g. to retry an earlier attempt; by default a new
        one.  owner: who holds it, shown by status() (exclusive holds only).  shared: a
        read hold, beside any number of readers, never beside a writer.  reentrant (with
        the lease of the current exclusive holder): one more hold, same token, each
        release() gives one back.  An attempt that gets no answer is sent again with the
        same lease (self.retries times; never a reentrant one, which would count twice).

        Raises LockHeld (retry_after) when another lease holds it, QuorumUnavailable (or
        another ServiceUnavailable), Unauthorized, InvalidRequest, Unreachable."""
        call = _proto.acquire(name, ttl, wait, lease or new_lease(), owner, shared, reentrant)
        return self.execute(call, retries=0 if reentrant else self.retries)

    def release(self, name: str, lease: str) -> models.Released:
        """Release the lock `name` held by lease (exclusive or shared); a reentrant lease
        gives one hold back (released False, holds left).  Raises LeaseLost when the lease
        no longer holds it, ReleaseUnconfirmed when masters that did not answer may still
        hold it (the service finishes the release), ServiceUnavailable, Unreachable."""
        return self.execute(_proto.release(_proto.lock_path(name), lease))

    def extend(self, name: str, lease: str, ttl: Optional[Seconds] = None, *,
               timeout: Optional[Seconds] = None) -> models.Extension:
        """Extend the lock `name` held by lease to ttl seconds from now (default: the
        service's default ttl); timeout: seconds for the whole call (default
        self.timeout).  Raises LeaseLost when the lease no longer holds it,
        ServiceUnavailable (the lease may still hold until its validity ends),
        Unreachable."""
        return self.execute(_proto.extend(_proto.lock_path(name), lease, ttl),
                            timeout=None if timeout is None else _proto.seconds(timeout,
                                                                                "timeout"))

    def force_release(self, name: str) -> models.Released:
        """Break the lock `name` whatever its lease (DELETE ?force=true; a token marked
        +admin only: Forbidden otherwise).  The holder is not told; its fencing token is
        what keeps it off the resource."""
        return self.execute(_proto.force_release(name))

    def status(self, name: str, *, lease: Optional[str] = None) -> models.Status:
        """The lock's state (never its lease); with the holder's lease, its reentrant hold
        count too (Status.holds)."""
        return self.execute(_proto.status(name, lease), retries=self.retries)

    def watch(self, name: str, index: str, wait: Seconds = 30.0) -> models.Status:
        """Wait up to `wait` seconds for the lock's index to be other than `index` (from
        an earlier Status): the state then, or after `wait` with the same index."""
        return self.execute(_proto.status(name, index=index, wait=wait))

    def changes(self, name: str, *, wait: Seconds = 30.0) -> Iterator[models.Status]:
        """The lock's state now, then at each change (a grant, a release, an expiry, a
        handoff; not an extension), without end: watches of `wait` seconds each."""
        st = self.status(name)
        yield st
        while True:
            nxt = self.watch(name, st.index, wait)
            if nxt.index != st.index:
                yield nxt
            st = nxt

    def list_locks(self, prefix: str = "", limit: Optional[int] = None) -> models.LockList:
        """The locks held under a name prefix (within the token's scope), by name, at most
        `limit` (default the service's, 100)."""
        return self.execute(_proto.list_locks(prefix, limit), retries=self.retries)

    def acquire_many(self, names: Iterable[str], ttl: Optional[Seconds] = None,
                     wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                     modes: Optional[Mapping[str, str]] = None) -> models.MultiGrant:
        """Acquire 1..32 names together, all or nothing, under one lease (no deadlock
        whatever order callers list them in); modes maps names to "shared" (the others
        are exclusive).  Release with release_many(lease), or each name with
        release(name, lease)."""
        call = _proto.acquire_many(names, ttl, wait, lease or new_lease(), modes)
        return self.execute(call, retries=self.retries)

    def release_many(self, lease: str) -> models.MultiReleased:
        """Release every name a acquire_many() granted under lease."""
        return self.execute(_proto.release_many(lease))

    # -- semaphores -----------------------------------------------------------------------------
    def acquire_permit(self, name: str, permits: int, ttl: Optional[Seconds] = None,
                       wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                       owner: Optional[str] = None) -> models.PermitGrant:
        """Take one of the `permits` permits (1..1024) of the semaphore `name`: at most
        that many holders at once.  Every caller of a name must use the same number
        (PermitsMismatch, with the number in use, otherwise).  LockHeld when every permit
        is taken (after waiting up to `wait`); the rest as acquire()."""
        call = _proto.acquire_permit(name, permits, ttl, wait, lease or new_lease(), owner)
        return self.execute(call, retries=self.retries)

    def release_permit(self, name: str, lease: str) -> models.Released:
        """Give back the permit of the semaphore `name` that lease holds; as release()."""
        return self.execute(_proto.release(_proto.sem_path(name), lease))

    def extend_permit(self, name: str, lease: str, ttl: Optional[Seconds] = None, *,
                      timeout: Optional[Seconds] = None) -> models.Extension:
        """Extend the permit of the semaphore `name` that lease holds; as extend() (the
        answer's fencing_token is the semaphore's counter on the permit's slot)."""
        return self.execute(_proto.extend(_proto.sem_path(name), lease, ttl),
                            timeout=None if timeout is None else _proto.seconds(timeout,
                                                                                "timeout"))

    def semaphore_status(self, name: str) -> models.SemaphoreStatus:
        """The semaphore's permits held and free (never a lease)."""
        return self.execute(_proto.semaphore_status(name), retries=self.retries)

    # -- the probes ---------------------------------------------------------------------------
    def health(self) -> models.Health:
        """GET /healthz: the service runs (and the masters' last known state)."""
        return self.execute(_proto.health(), retries=self.retries)

    def ready(self) -> models.Health:
        """GET /readyz: whether a quorum of masters answers now (Health.ready)."""
        return self.execute(_proto.readiness(), retries=self.retries)

    def metrics(self) -> str:
        """GET /metrics: the Prometheus text."""
        return self.execute(_proto.metrics(), retries=self.retries)

    # -- held forms ---------------------------------------------------------------------------
    def lock(self, name: str, ttl: Seconds = 30.0, wait: Optional[Seconds] = None, *,
             owner: Optional[str] = None, lease: Optional[str] = None,
             keepalive: str = "stream", shared: bool = False, reentrant: bool = False,
             on_lost: Optional[Callable[[], None]] = None) -> Lock:
        """A lock to hold in a `with` block (or by acquire()/release()):

            with client.lock("reports", ttl=10, wait=5) as lock:
                write(report, fencing_token=lock.fencing_token)

        kept alive while held (keepalive="stream": a duplex streamed hold, the service
        lets it go when we stop pinging; "extend": a thread of ours PATCHes it every
        ttl/3).  lock.lost (a threading.Event) is set, and on_lost called in a thread of
        its own, the moment it may no longer be held; leaving the block releases it, and
        raises LeaseLost if it was lost meanwhile.  shared=True: a read hold.
        reentrant=True: entering the same Lock again (nested) takes one more hold."""
        return Lock(self, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                    keepalive=keepalive, shared=shared, reentrant=reentrant, on_lost=on_lost)

    def rlock(self, name: str, ttl: Seconds = 30.0, wait: Optional[Seconds] = None,
              **kwargs: Any) -> Lock:
        """client.lock(..., reentrant=True), as threading.RLock is to threading.Lock."""
        return self.lock(name, ttl, wait, reentrant=True, **kwargs)

    def semaphore(self, name: str, permits: int, ttl: Seconds = 30.0,
                  wait: Optional[Seconds] = None, *, owner: Optional[str] = None,
                  lease: Optional[str] = None, keepalive: str = "stream",
                  on_lost: Optional[Callable[[], None]] = None) -> Permit:
        """A permit of the semaphore `name` (of `permits`) to hold in a `with` block, with
        permit.slot and permit.fencing_token; kept and lost as client.lock()."""
        return Permit(self, name, permits, ttl=ttl, wait=wait, owner=owner, lease=lease,
                      keepalive=keepalive, on_lost=on_lost)

    def locks(self, names: Iterable[str], ttl: Seconds = 30.0,
              wait: Optional[Seconds] = None, *, modes: Optional[Mapping[str, str]] = None,
              lease: Optional[str] = None,
              on_lost: Optional[Callable[[], None]] = None) -> LockSet:
        """Several names to hold together in a `with` block (all or nothing), with
        fencing_tokens[name]; modes maps names to "shared".  Kept alive by extensions of
        each name; lost as client.lock()."""
        return LockSet(self, names, ttl=ttl, wait=wait, lease=lease, modes=modes,
                       on_lost=on_lost)

    def election(self, name: str, *, value: Optional[str] = None, ttl: Seconds = 30.0,
                 keepalive: str = "stream", max_wait: Seconds = 60.0,
                 on_lost: Optional[Callable[[], None]] = None) -> Election:
        """A leader election on the lock `name` (etcd's Election): campaign(), resign(),
        leader(), observe(), proclaim(); value: what this campaigner shows as leader."""
        return Election(self, name, value=value, ttl=ttl, keepalive=keepalive,
                        max_wait=max_wait, on_lost=on_lost)


__all__ = ["Client", "new_lease"]
