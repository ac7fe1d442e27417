"""aio_lock.py -- held locks of the asyncio client: AsyncLock, AsyncPermit and
AsyncLockSet, held with `async with` and kept alive by a task of the loop; the twins of
lock.py's Lock, Permit and LockSet (the same attributes, the same loss rules), with `lost`
an asyncio.Event and on_lost a function or a coroutine function.

What a holder believes is what lock.py says: each validity counted from the send of the
request or ping whose round made it, `lost` set a margin before its end by a timer of the
loop (call_later), never by a read: no read, write or name lookup can delay it.  A
coroutine that blocks the loop (a blocking call without await) delays every timer of the
loop, this one included; owned() and check() read the clock themselves.

This module uses only the AsyncClient's public calls (execute(), transport); aio.py
imports it, never the other way round."""
from __future__ import annotations

import asyncio
import time
from typing import (Any, Awaitable, Callable, Iterable, Mapping, Optional, Protocol, Tuple,
                    TypeVar, Union)

from . import _proto, models
from ._aio_http import Conn
from ._belief import AsyncBelief
from ._duplex import DuplexSession
from ._held import Held, PermitCalls, SetCalls
from ._proto import Call, Seconds, loss_margin, new_lease
from .errors import (LeaseLost, ProtocolError, RedlockError, ReleaseUnconfirmed,
                     ServiceUnavailable, Unreachable)


OnLost = Optional[Callable[[], Union[None, Awaitable[None]]]]
A = TypeVar("A", bound="AsyncLock")


class Api(Protocol):
    """What a held lock needs of its asyncio client (redlockd.aio.AsyncClient is one)."""
    timeout: float
    retries: int
    transport: Any

    async def execute(self, call: Call, *, timeout: Optional[float] = None,
                      retries: int = 0) -> Any: ...

    async def status(self, name: str, *, lease: Optional[str] = None) -> models.Status: ...

    async def semaphore_status(self, name: str) -> models.SemaphoreStatus: ...


class AsyncLock(Held):
    """A lock held with `async with`; see AsyncClient.lock() (and the blocking Lock, whose
    attributes it has: lease, fencing_token, validity, ttl, deadline, holds, lost (an
    asyncio.Event here), lost_reason, lost_at, release_confirmed)."""

    def __init__(self, client: Api, name: str, *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 shared: bool = False, reentrant: bool = False, on_lost: OnLost = None):
        super().__init__(client, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                         keepalive=keepalive, shared=shared, reentrant=reentrant,
                         on_lost=on_lost)
        self.lost = asyncio.Event()
        self._answered = asyncio.Event()
        self._kick = asyncio.Event()
        self._task: Optional[asyncio.Task] = None

    async def locked(self) -> bool:
        st = await self.client.status(self.name)
        return st.held or st.readers > 0

    async def __aenter__(self: A) -> A:
        return await self.acquire()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            await self.release()
        except RedlockError:
            if exc_type is None:
                raise
        return False

    async def acquire(self: A) -> A:
        """As Lock.acquire()."""
        if self.grant is not None and not self._released and self.reentrant:
            g = await self.client.execute(self._acquire_call(self.lease, reentrant=True))
            self.holds = g.holds
            return self
        if self._used:
            raise RuntimeError("a %s is acquired once (make another with the client; "
                               "reentrant=True to nest)" % type(self).__name__)
        self._used = True
        lease = self._lease or new_lease()
        c = self.client
        conn: Optional[Conn] = None
        interval = 0.0
        if self.keepalive == "stream":
            grant, conn, interval = await self._open_stream(lease)
        else:
            grant = await c.execute(self._acquire_call(lease), retries=c.retries)
        self.grant = grant
        self.holds = getattr(grant, "holds", 1)
        late = self._late(grant)
        self._belief = AsyncBelief(grant.deadline, loss_margin(self.ttl), self.lost,
                                    self.on_lost, self._kick.set, pending=late)
        try:
            if late and conn is None:
                deadline, _ = await self._extend_once(c.timeout)
                self._belief.extend_to(deadline)
            if conn is not None:
                self._session = DuplexSession(self._belief, interval, c.timeout,
                                              lambda: self._release_wanted,
                                              self._answered.set)
                self._task = asyncio.ensure_future(self._run_stream(conn, self._session))
            else:
                self._task = asyncio.ensure_future(
                    self._run_extend(grant.deadline - grant.validity))
            if late and conn is not None:
                try:
                    await asyncio.wait_for(self._answered.wait(), c.timeout)
                except asyncio.TimeoutError:
                    pass
            self._belief.confirm()
            self._belief.check_now()
            if not self.owned():
                raise LeaseLost("the %s %r came too late to be confirmed: %s" % (
                    self._what, self.name, self.lost_reason or "no fresh validity"))
        except BaseException:
            if conn is not None and self._task is None:
                conn.close()
            await self._abandon()
            raise
        return self

    async def _open_stream(self, lease: str) -> Tuple[Any, Conn, float]:
        c = self.client
        attempt = 0
        while True:
            call = _proto.hold_call(self._acquire_call(lease))
            deadline = time.monotonic() + c.timeout + call.wait
            try:
                head, body, sent, conn, line = await c.transport.open_duplex(call, deadline)
                if conn is None:
                    if head.status // 100 == 2:
                        raise ProtocolError("HTTP %d to a duplex hold, without switching: a "
                                            "service without duplex holds?" % head.status,
                                            status=head.status)
                    _proto.answer(call, head.status, body, sent)    # raises the error
                    raise ProtocolError("HTTP %d to a duplex hold" % head.status,
                                        status=head.status)
                try:
                    grant, interval = _proto.duplex_grant(call, line.rstrip(b"\r\n"), sent)
                except BaseException:
                    conn.close()
                    raise
                return grant, conn, interval
            except Unreachable:
                attempt += 1
                if attempt > c.retries or self._lease is not None:
                    raise
                lease = new_lease()

    async def _abandon(self) -> None:
        self._released = True
        if self._belief is not None:
            self._belief.end()
        self._release_wanted = True
        self._kick.set()
        if self.keepalive == "extend":
            await self._join(self.client.timeout)
            try:
                await self.client.execute(self._release_call(self.grant.lease))
            except RedlockError:
                pass

    async def _run_stream(self, conn: Conn, session: DuplexSession) -> None:
        """The duplex hold's task: runs the session (_duplex.py) on the connection."""
        read: Optional[asyncio.Future] = None
        try:
            while True:
                what, data, until = session.step(time.monotonic())
                if what == "stop":
                    break
                if what == "send":
                    conn.writer.write(data)
                    await asyncio.wait_for(conn.writer.drain(),
                                           max(0.001, until - time.monotonic()))
                    continue
                if read is None:
                    read = asyncio.ensure_future(conn.reader.readuntil(b"\n"))
                kick = asyncio.ensure_future(self._kick.wait())
                try:
                    await asyncio.wait({read, kick}, timeout=max(0.0, until - time.monotonic()),
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    kick.cancel()
                self._kick.clear()
                if not read.done():
                    session.idle(time.monotonic())
                    continue
                try:
                    raw = read.result()
                except asyncio.IncompleteReadError:
                    raise EOFError() from None
                except asyncio.LimitOverrunError:
                    raise ProtocolError("a hold line too long") from None
                finally:
                    read = None
                session.line(raw.rstrip(b"\r\n"), time.monotonic())
        except EOFError:
            session.end("the stream ended")
        except (OSError, ProtocolError, asyncio.TimeoutError) as e:
            session.end("the stream failed: %s" % (e or type(e).__name__))
        finally:
            if read is not None:
                read.cancel()
            conn.close()
            self._answered.set()

    async def _extend_once(self, timeout: float) -> Tuple[float, float]:
        if timeout <= 0:
            raise Unreachable("no time left to extend the %s %r" % (self._what, self.name))
        deadline = None
        first = None
        end = time.monotonic() + timeout
        for call in self._extend_calls(self.lease):
            ext = await self.client.execute(call, timeout=max(0.001, end - time.monotonic()))
            sent = ext.deadline - ext.validity
            first = sent if first is None else first
            deadline = ext.deadline if deadline is None else min(deadline, ext.deadline)
        assert deadline is not None and first is not None
        return deadline, first

    async def _run_extend(self, last_sent: float) -> None:
        b = self._belief
        assert b is not None
        period = self.ttl / 3.0
        retry = min(0.1, period / 4)
        next_at = last_sent + period
        while True:
            try:
                await asyncio.wait_for(
                    self._kick.wait(),
                    max(0.0, min(next_at, b.core.lose_at) - time.monotonic()))
            except asyncio.TimeoutError:
                pass
            self._kick.clear()
            if b.core.done or self._release_wanted:
                break
            now = time.monotonic()
            if now >= b.core.lose_at:
                b.check_now()
                break
            if now < next_at:
                continue
            try:
                deadline, sent = await self._extend_once(
                    min(self.client.timeout, b.core.lose_at - now))
            except LeaseLost as e:
                b.lose("the lease is gone (%s)" % e.message, lease_gone=True)
                break
            except (ServiceUnavailable, Unreachable):
                next_at = time.monotonic() + retry
                continue
            except RedlockError as e:
                b.lose("extending failed: %s" % e)
                break
            b.extend_to(deadline)
            next_at = sent + period
        if b.core.is_lost and (self._let_go_always or not b.core.lease_gone):
            self._let_go_at = time.monotonic()
            try:
                await self.client.execute(self._release_call(self.lease))
            except RedlockError:
                pass

    async def extend(self) -> float:
        """As Lock.extend()."""
        self.check()
        b = self._belief
        assert b is not None
        try:
            deadline, _ = await self._extend_once(
                min(self.client.timeout, b.core.lose_at - time.monotonic()))
        except LeaseLost as e:
            b.lose("the lease is gone (%s)" % e.message, lease_gone=True)
            raise
        b.extend_to(deadline)
        return self.remaining()

    async def _join(self, timeout: float) -> None:
        t = self._task
        if t is not None and t is not asyncio.current_task():
            try:
                await asyncio.wait_for(asyncio.shield(t), timeout)
            except (asyncio.TimeoutError, Exception):
                pass

    async def release(self) -> None:
        """As Lock.release()."""
        c = self.client
        if self.grant is None or self._released:
            return
        if self.reentrant and self.holds > 1 and not self.lost.is_set():
            r = await c.execute(self._release_call(self.lease))
            self.holds = r.holds if not r.released else 0
            if r.released:
                self._released = True
                self._belief.end()   # type: ignore[union-attr]
                self._release_wanted = True
                self._kick.set()
            return
        self._released = True
        b = self._belief
        assert b is not None
        b.check_now()      # its deadline, should the timer not have run yet (a pause)
        was_lost = not b.end()
        error: Optional[RedlockError] = None
        self._release_wanted = True
        self._kick.set()
        if not was_lost:
            await self._join(c.timeout + 1.0)
            if self.keepalive == "extend":
                self._let_go_at = time.monotonic()
                try:
                    await c.execute(self._release_call(self.lease))
                    self._release_confirmed = True
                except LeaseLost as e:
                    b.core.lost_at_release("the lease was gone at release (%s)" % e.message)
                    self.lost.set()
                    was_lost = True
                except ReleaseUnconfirmed:
                    self._release_confirmed = False
                except RedlockError as e:
                    error = e
        else:
            # Lost: its keeper lets go of what is left (a set's other names, a lock
            # whose lease may still stand); wait for that, bounded, so that what the
            # caller sees after release() (or after its with block) is let go.
            await self._join(c.timeout + 1.0)
        self.holds = 0
        if was_lost:
            raise self._lost_error()
        if error is not None:
            raise error


class AsyncPermit(PermitCalls, AsyncLock):
    """As Permit, for asyncio."""

    def __init__(self, client: Api, name: str, permits: int, *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 on_lost: OnLost = None):
        self.permits = self._check_permits(permits)
        AsyncLock.__init__(self, client, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                           keepalive=keepalive, on_lost=on_lost)

    async def locked(self) -> bool:
        return (await self.client.semaphore_status(self.name)).free == 0


class AsyncLockSet(SetCalls, AsyncLock):
    """As LockSet, for asyncio."""

    def __init__(self, client: Api, names: Iterable[str], *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, lease: Optional[str] = None,
                 modes: Optional[Mapping[str, str]] = None, on_lost: OnLost = None):
        name = self._set_names(names, modes)
        AsyncLock.__init__(self, client, name, ttl=ttl, wait=wait, lease=lease,
                           keepalive="extend", on_lost=on_lost)

    async def locked(self) -> bool:
        for n in self.names:
            st = await self.client.status(n)
            if st.held or st.readers:
                return True
        return False
