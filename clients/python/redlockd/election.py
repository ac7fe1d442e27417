"""election.py -- leader election on a lock, as etcd's concurrency.Election: campaign()
blocks until this campaigner leads (its leadership is a held Lock, `lost` set the moment
it may no longer assume it leads), resign() steps down, leader() says who leads,
observe() follows the leaders, proclaim() changes what this leader shows.  Election for
the blocking Client, AsyncElection for the asyncio one.

Uses only the clients' public calls (lock, status, changes, acquire)."""
from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterator, Optional, Protocol

from . import models
from ._proto import Seconds, seconds
from .errors import LeaseLost, LockHeld, ServiceUnavailable, Unreachable
from .lock import Lock



class Api(Protocol):
    """What an election needs of its client (redlockd.Client is one)."""

    def lock(self, name: str, ttl: Seconds = 30.0, wait: Optional[Seconds] = None, *,
             owner: Optional[str] = None, keepalive: str = "stream",
             on_lost: Optional[Callable[[], None]] = None) -> Lock: ...

    def acquire(self, name: str, ttl: Optional[Seconds] = None,
                wait: Optional[Seconds] = None, *, lease: Optional[str] = None,
                owner: Optional[str] = None) -> models.Grant: ...

    def status(self, name: str) -> models.Status: ...

    def changes(self, name: str, *, wait: Seconds = 30.0) -> Iterator[models.Status]: ...


class Election:
    """An election on the lock `name`; see Client.election().  value: what the leader
    shows (the lock's owner).  While leading: lock (the held Lock), fencing_token, lost
    (threading.Event), lost_reason; is_leader() says whether it still leads."""

    def __init__(self, client: Api, name: str, *, value: Optional[str] = None,
                 ttl: Seconds = 30.0, keepalive: str = "stream", max_wait: Seconds = 60.0,
                 on_lost: Optional[Callable[[], None]] = None):
        self.client = client
        self.name = name
        self.value = value
        self.ttl = seconds(ttl, "ttl")
        self.keepalive = keepalive
        self.max_wait = seconds(max_wait, "max_wait")
        self.on_lost = on_lost
        self.lock: Optional[Lock] = None

    def __repr__(self) -> str:
        return "<Election %r %s>" % (self.name, "leading" if self.is_leader() else "not leading")

    # -- campaigning ------------------------------------------------------------------------
    def campaign(self, timeout: Optional[Seconds] = None) -> Lock:
        """Block until this campaigner leads (or `timeout` seconds pass: LockHeld, or the
        last ServiceUnavailable/Unreachable); returns the leadership's Lock.  Each attempt
        waits on the service for the lock (up to max_wait, at most the service's
        --max-wait-ms, 60 s by default); after a 503 or no answer it backs off (jittered,
        100 ms to 5 s)."""
        if self.is_leader():
            raise RuntimeError("already leading %r: resign() first" % self.name)
        end = None if timeout is None else time.monotonic() + seconds(timeout, "timeout")
        backoff = 0.1
        while True:
            left = None if end is None else end - time.monotonic()
            wait = self.max_wait if left is None else max(0.0, min(self.max_wait, left))
            lock = self.client.lock(self.name, ttl=self.ttl, wait=wait, owner=self.value,
                                    keepalive=self.keepalive, on_lost=self.on_lost)
            try:
                lock.acquire()
            except LockHeld:
                if end is not None and time.monotonic() >= end:
                    raise
                continue
            except (ServiceUnavailable, Unreachable, LeaseLost):
                if end is not None and time.monotonic() >= end:
                    raise
                pause = backoff * random.uniform(0.5, 1.0)
                if end is not None:
                    pause = min(pause, max(0.0, end - time.monotonic()))
                time.sleep(pause)
                backoff = min(backoff * 2, 5.0)
                continue
            self.lock = lock
            return lock

    def resign(self) -> bool:
        """Step down (release the lock, so that the next campaigner leads at once).
        Returns whether it still led until then (False: it had lost the lead already)."""
        lock, self.lock = self.lock, None
        if lock is None:
            return False
        try:
            lock.release()
        except LeaseLost:
            return False
        return True

    def proclaim(self, value: str) -> None:
        """Show another value as this leader's (the lock's owner), keeping the lead: an
        acquire repeating the lease (which the service answers as a retry)."""
        lock = self.lock
        if lock is None or not lock.owned():
            raise LeaseLost("not leading %r" % self.name)
        self.client.acquire(self.name, ttl=self.ttl, lease=lock.lease, owner=value)
        self.value = value

    def __enter__(self) -> "Election":
        """Campaign (unless leading already); the block's end resigns."""
        if not self.is_leader():
            self.campaign()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.resign()
        return False

    # -- while leading ----------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self.lock is not None and self.lock.owned()

    @property
    def lost(self) -> threading.Event:
        """The current leadership's loss signal (an Event already set when not leading)."""
        if self.lock is None:
            ev = threading.Event()
            ev.set()
            return ev
        return self.lock.lost

    @property
    def lost_reason(self) -> Optional[str]:
        return self.lock.lost_reason if self.lock is not None else None

    @property
    def fencing_token(self) -> int:
        if self.lock is None:
            raise LeaseLost("not leading %r" % self.name)
        return self.lock.fencing_token

    # -- observing --------------------------------------------------------------------------
    def leader(self) -> Optional[models.Leader]:
        """Who leads now (None: nobody)."""
        return models.leader(self.client.status(self.name))

    def observe(self, wait: Seconds = 30.0) -> Iterator[Optional[models.Leader]]:
        """The leader now, then each new one (None while nobody leads), as they change:
        a watch of the lock (no polling)."""
        last: Any = ()
        for st in self.client.changes(self.name, wait=wait):
            now = models.leader(st)
            key = None if now is None else (now.owner, now.fencing_token)
            if key != last:
                last = key
                yield now


class AsyncElection:
    """As Election, for asyncio (AsyncClient.election()): campaign(), resign(),
    proclaim(), leader() are coroutines, observe() an async iterator, lost an
    asyncio.Event, the leadership an AsyncLock."""

    def __init__(self, client: Any, name: str, *, value: Optional[str] = None,
                 ttl: Seconds = 30.0, keepalive: str = "stream", max_wait: Seconds = 60.0,
                 on_lost: Optional[Callable[[], Any]] = None):
        self.client = client
        self.name = name
        self.value = value
        self.ttl = seconds(ttl, "ttl")
        self.keepalive = keepalive
        self.max_wait = seconds(max_wait, "max_wait")
        self.on_lost = on_lost
        self.lock: Optional[Any] = None

    async def campaign(self, timeout: Optional[Seconds] = None) -> Any:
        if self.is_leader():
            raise RuntimeError("already leading %r: resign() first" % self.name)
        end = None if timeout is None else time.monotonic() + seconds(timeout,
                                                                             "timeout")
        backoff = 0.1
        while True:
            left = None if end is None else end - time.monotonic()
            wait = self.max_wait if left is None else max(0.0, min(self.max_wait, left))
            lock = self.client.lock(self.name, ttl=self.ttl, wait=wait, owner=self.value,
                                    keepalive=self.keepalive, on_lost=self.on_lost)
            try:
                await lock.acquire()
            except LockHeld:
                if end is not None and time.monotonic() >= end:
                    raise
                continue
            except (ServiceUnavailable, Unreachable, LeaseLost):
                if end is not None and time.monotonic() >= end:
                    raise
                pause = backoff * random.uniform(0.5, 1.0)
                if end is not None:
                    pause = min(pause, max(0.0, end - time.monotonic()))
                await asyncio.sleep(pause)
                backoff = min(backoff * 2, 5.0)
                continue
            self.lock = lock
            return lock

    async def resign(self) -> bool:
        lock, self.lock = self.lock, None
        if lock is None:
            return False
        try:
            await lock.release()
        except LeaseLost:
            return False
        return True

    async def proclaim(self, value: str) -> None:
        lock = self.lock
        if lock is None or not lock.owned():
            raise LeaseLost("not leading %r" % self.name)
        await self.client.acquire(self.name, ttl=self.ttl, lease=lock.lease, owner=value)
        self.value = value

    async def __aenter__(self) -> "AsyncElection":
        if not self.is_leader():
            await self.campaign()
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        await self.resign()
        return False

    def is_leader(self) -> bool:
        return self.lock is not None and self.lock.owned()

    @property
    def lost(self) -> asyncio.Event:
        if self.lock is None:
            ev = asyncio.Event()
            ev.set()
            return ev
        return self.lock.lost

    @property
    def lost_reason(self) -> Optional[str]:
        return self.lock.lost_reason if self.lock is not None else None

    @property
    def fencing_token(self) -> int:
        if self.lock is None:
            raise LeaseLost("not leading %r" % self.name)
        return self.lock.fencing_token

    async def leader(self) -> Optional[models.Leader]:
        return models.leader(await self.client.status(self.name))

    async def observe(self, wait: Seconds = 30.0) -> AsyncIterator[Optional[models.Leader]]:
        last: Any = ()
        async for st in self.client.changes(self.name, wait=wait):
            now = models.leader(st)
            key = None if now is None else (now.owner, now.fencing_token)
            if key != last:
                last = key
                yield now
