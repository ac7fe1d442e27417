"""aio.py -- the asyncio client: AsyncClient has the blocking Client's methods, with the
same names, arguments, results and errors, as coroutines; its held forms (AsyncLock,
AsyncPermit, AsyncLockSet of aio_lock.py, AsyncElection of election.py) are held with
`async with` and kept alive by a task of the event loop.

    import redlockd.aio
    async with redlockd.aio.AsyncClient() as client:
        async with client.lock("reports", ttl=10, wait=5) as lock:
            await write_report(fencing_token=lock.fencing_token)   # lock.lost: set if lost

Every call has one deadline for all of it (asyncio.wait_for around the name lookup,
connect, TLS, send and receive): `timeout` plus the wait it asks the service for."""
from __future__ import annotations

import os
import ssl
import time
from typing import Any, AsyncIterator, Iterable, Mapping, Optional

from . import _proto, models
from ._aio_http import AsyncTransport
from ._proto import Call, Endpoint, Seconds, new_lease
from .aio_lock import AsyncLock, AsyncLockSet, AsyncPermit, OnLost
from .election import AsyncElection
from .errors import Unreachable


class AsyncClient:
    """The asyncio twin of redlockd.Client: the same arguments, methods (coroutines here),
    results and errors.  Use it from one event loop; `async with AsyncClient() as c:`
    closes its idle connections at the end."""

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
        self.transport = AsyncTransport(ep, _proto.check_token(token), ssl_context,
                                        pool_size, _proto.seconds(idle_timeout,
                                                                  "idle_timeout"))

    @property
    def url(self) -> str:
        return self.transport.ep.url

    @property
    def token(self) -> Optional[str]:
        return self.transport.token

    def __repr__(self) -> str:
        return "AsyncClient(%r)" % self.url

    async def close(self) -> None:
        self.transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        await self.close()
        return False

    async def execute(self, call: Call, *, timeout: Optional[float] = None,
                      retries: int = 0) -> Any:
        """As Client.execute()."""
        attempt = 0
        while True:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout) \
                + call.wait
            try:
                status, raw, sent = await self.transport.exchange(call, deadline)
            except Unreachable:
                attempt += 1
                if attempt > retries:
                    raise
                continue
            return _proto.answer(call, status, raw, sent)

    def _timeout(self, timeout: Optional[Seconds]) -> Optional[float]:
        return None if timeout is None else _proto.seconds(timeout, "timeout")

    # -- locks
    async def acquire(self, name: str, ttl: Optional[Seconds] = None,
                      wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                      owner: Optional[str] = None, shared: bool = False,
                      reentrant: bool = False) -> models.Grant:
        """As Client.acquire()."""
        call = _proto.acquire(name, ttl, wait, lease or new_lease(), owner, shared, reentrant)
        return await self.execute(call, retries=0 if reentrant else self.retries)

    async def release(self, name: str, lease: str) -> models.Released:
        """As Client.release()."""
        return await self.execute(_proto.release(_proto.lock_path(name), lease))

    async def extend(self, name: str, lease: str, ttl: Optional[Seconds] = None, *,
                     timeout: Optional[Seconds] = None) -> models.Extension:
        """As Client.extend()."""
        return await self.execute(_proto.extend(_proto.lock_path(name), lease, ttl),
                                  timeout=self._timeout(timeout))

    async def force_release(self, name: str) -> models.Released:
        """As Client.force_release()."""
        return await self.execute(_proto.force_release(name))

    async def status(self, name: str, *, lease: Optional[str] = None) -> models.Status:
        """As Client.status()."""
        return await self.execute(_proto.status(name, lease), retries=self.retries)

    async def watch(self, name: str, index: str, wait: Seconds = 30.0) -> models.Status:
        """As Client.watch()."""
        return await self.execute(_proto.status(name, index=index, wait=wait))

    async def changes(self, name: str, *, wait: Seconds = 30.0
                      ) -> AsyncIterator[models.Status]:
        """As Client.changes(), an async iterator."""
        st = await self.status(name)
        yield st
        while True:
            nxt = await self.watch(name, st.index, wait)
            if nxt.index != st.index:
                yield nxt
            st = nxt

    async def list_locks(self, prefix: str = "",
                         limit: Optional[int] = None) -> models.LockList:
        """As Client.list_locks()."""
        return await self.execute(_proto.list_locks(prefix, limit), retries=self.retries)

    async def acquire_many(self, names: Iterable[str], ttl: Optional[Seconds] = None,
                           wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                           modes: Optional[Mapping[str, str]] = None) -> models.MultiGrant:
        """As Client.acquire_many()."""
        call = _proto.acquire_many(names, ttl, wait, lease or new_lease(), modes)
        return await self.execute(call, retries=self.retries)

    async def release_many(self, lease: str) -> models.MultiReleased:
        """As Client.release_many()."""
        return await self.execute(_proto.release_many(lease))

    # -- semaphores
    async def acquire_permit(self, name: str, permits: int, ttl: Optional[Seconds] = None,
                             wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                             owner: Optional[str] = None) -> models.PermitGrant:
        """As Client.acquire_permit()."""
        call = _proto.acquire_permit(name, permits, ttl, wait, lease or new_lease(), owner)
        return await self.execute(call, retries=self.retries)

    async def release_permit(self, name: str, lease: str) -> models.Released:
        """As Client.release_permit()."""
        return await self.execute(_proto.release(_proto.sem_path(name), lease))

    async def extend_permit(self, name: str, lease: str, ttl: Optional[Seconds] = None, *,
                            timeout: Optional[Seconds] = None) -> models.Extension:
        """As Client.extend_permit()."""
        return await self.execute(_proto.extend(_proto.sem_path(name), lease, ttl),
                                  timeout=self._timeout(timeout))

    async def semaphore_status(self, name: str) -> models.SemaphoreStatus:
        """As Client.semaphore_status()."""
        return await self.execute(_proto.semaphore_status(name), retries=self.retries)

    # -- the probes
    async def health(self) -> models.Health:
        """As Client.health()."""
        return await self.execute(_proto.health(), retries=self.retries)

    async def ready(self) -> models.Health:
        """As Client.ready()."""
        return await self.execute(_proto.readiness(), retries=self.retries)

    async def metrics(self) -> str:
        """As Client.metrics()."""
        return await self.execute(_proto.metrics(), retries=self.retries)

    # -- held forms
    def lock(self, name: str, ttl: Seconds = 30.0, wait: Optional[Seconds] = None, *,
             owner: Optional[str] = None, lease: Optional[str] = None,
             keepalive: str = "stream", shared: bool = False, reentrant: bool = False,
             on_lost: OnLost = None) -> AsyncLock:
        """As Client.lock(); hold it with `async with`.  on_lost may be a coroutine
        function (run as a task) or a plain one (called by the loop)."""
        return AsyncLock(self, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                         keepalive=keepalive, shared=shared, reentrant=reentrant,
                         on_lost=on_lost)

    def rlock(self, name: str, ttl: Seconds = 30.0, wait: Optional[Seconds] = None,
              **kwargs: Any) -> AsyncLock:
        """As Client.rlock()."""
        return self.lock(name, ttl, wait, reentrant=True, **kwargs)

    def semaphore(self, name: str, permits: int, ttl: Seconds = 30.0,
                  wait: Optional[Seconds] = None, *, owner: Optional[str] = None,
                  lease: Optional[str] = None, keepalive: str = "stream",
                  on_lost: OnLost = None) -> AsyncPermit:
        """As Client.semaphore()."""
        return AsyncPermit(self, name, permits, ttl=ttl, wait=wait, owner=owner, lease=lease,
                           keepalive=keepalive, on_lost=on_lost)

    def locks(self, names: Iterable[str], ttl: Seconds = 30.0,
              wait: Optional[Seconds] = None, *, modes: Optional[Mapping[str, str]] = None,
              lease: Optional[str] = None, on_lost: OnLost = None) -> AsyncLockSet:
        """As Client.locks()."""
        return AsyncLockSet(self, names, ttl=ttl, wait=wait, lease=lease, modes=modes,
                            on_lost=on_lost)

    def election(self, name: str, *, value: Optional[str] = None, ttl: Seconds = 30.0,
                 keepalive: str = "stream", max_wait: Seconds = 60.0,
                 on_lost: OnLost = None) -> AsyncElection:
        """As Client.election()."""
        return AsyncElection(self, name, value=value, ttl=ttl, keepalive=keepalive,
                             max_wait=max_wait, on_lost=on_lost)


__all__ = ["AsyncClient", "AsyncLock", "AsyncPermit", "AsyncLockSet", "AsyncElection"]
