"""lock.py -- held locks of the blocking client: Lock (exclusive, shared or reentrant),
Permit (of a semaphore) and LockSet (several names at once), each held in a `with` block
(or by acquire()/release()) and kept alive while held, with `lost` set the moment the
holder may no longer assume it holds it.

What the holder believes (docs/DESIGN.md sections 8 and 10): every validity is counted
from a moment known to precede the round that made it -- the send of the acquire, of the
PATCH, or of the ping that an `alive` line answers -- and `deadline` is the latest end of
those.  `lost` is set a margin before it (loss_margin: a tenth of the ttl, 10 ms..1 s)
unless a later validity came, by a timer (_belief.py) that no read, write or name lookup
can delay; and at once when the service or the connection says the lock is gone.

Two keep-alives:
  "stream"  a duplex streamed hold (Upgrade: redlock-hold): one thread of ours pings
            every ping_ms, one ping in flight, each answer's validity counted from that
            ping's send; the service lets the lock go when the pings stop (a stopped or
            dead process) and we send {"release":true} to release.
  "extend"  an ordinary grant and one thread of ours that PATCHes it every ttl/3 (every
            100 ms after a failure), each call bounded by the lock's own deadline.

This module uses only the Client's public calls (execute(), transport); client.py imports
it, never the other way round."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, Tuple, TypeVar


from . import _proto, models
from ._belief import Belief
from ._duplex import DuplexSession
from ._held import Held, PermitCalls, SetCalls
from ._http import DuplexChannel
from ._proto import Call, Seconds, loss_margin, new_lease
from .errors import (LeaseLost, ProtocolError, RedlockError, ReleaseUnconfirmed,
                     ServiceUnavailable, Unreachable)


class Api(Protocol):
    """What a held lock needs of its client (redlockd.Client is one): the calls, its
    timeout and retries, and the transport a duplex hold opens its connection with."""
    timeout: float
    retries: int
    transport: Any

    def execute(self, call: Call, *, timeout: Optional[float] = None,
                retries: int = 0) -> Any: ...

    def status(self, name: str, *, lease: Optional[str] = None) -> models.Status: ...

    def semaphore_status(self, name: str) -> models.SemaphoreStatus: ...


L = TypeVar("L", bound="Lock")


class Lock(Held):
    """A lock held in a `with` block; see Client.lock().  Once acquired: name, lease,
    fencing_token, validity (the grant's, s), ttl, deadline (time.monotonic()), holds
    (reentrant count), lost (threading.Event), lost_reason, lost_at; shared says whether
    it is a read hold."""

    def __init__(self, client: Api, name: str, *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 shared: bool = False, reentrant: bool = False,
                 on_lost: Optional[Callable[[], None]] = None):
        super().__init__(client, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                         keepalive=keepalive, shared=shared, reentrant=reentrant,
                         on_lost=on_lost)
        self.lost = threading.Event()
        self._mu = threading.RLock()
        self._answered = threading.Event()     # stream: an alive answer was read
        self._kick = threading.Event()         # extend: wake the keeper
        self._channel: Optional[DuplexChannel] = None
        self._thread: Optional[threading.Thread] = None

    def locked(self) -> bool:
        """Whether anyone holds the name now (a GET; redis-py's locked())."""
        st = self.client.status(self.name)
        return st.held or st.readers > 0

    # -- acquire ----------------------------------------------------------------------------
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
        """Acquire it (waiting up to `wait`) and start keeping it alive; returns self.  A
        reentrant Lock already held takes one more hold (same lease, same token).  Raises
        what Client.acquire raises, or LeaseLost when a grant that came late could not be
        confirmed."""
        with self._mu:
            if self.grant is not None and not self._released and self.reentrant:
                return self._reenter()
            if self._used:
                raise RuntimeError("a %s is acquired once (make another with the client; "
                                   "reentrant=True to nest)" % type(self).__name__)
            self._used = True
        lease = self._lease or new_lease()
        c = self.client
        if self.keepalive == "stream":
            grant, channel, interval = self._open_stream(lease)
        else:
            grant = c.execute(self._acquire_call(lease), retries=c.retries)
            channel, interval = None, 0.0
        self.grant = grant
        self.holds = getattr(grant, "holds", 1)
        self._channel = channel
        # A late grant's belief is pending until a fresh validity confirms it (Held._late).
        late = self._late(grant)
        self._belief = Belief(grant.deadline, loss_margin(self.ttl), self.lost,
                              self.on_lost, self._wake, pending=late)
        try:
            if late and channel is None:
                deadline, _ = self._extend_once(c.timeout)
                self._belief.extend_to(deadline)
            if channel is not None:
                self._session = DuplexSession(self._belief, interval, c.timeout,
                                              lambda: self._release_wanted,
                                              self._answered.set)
                target: Callable[..., None] = self._run_stream
                args: Tuple[Any, ...] = (channel, self._session)
            else:
                target, args = self._run_extend, (grant.deadline - grant.validity,)
            self._thread = threading.Thread(target=target, args=args, daemon=True,
                                            name="redlockd-%s-%s" % (self._what, self.name))
            self._thread.start()
            if late and channel is not None:
                self._answered.wait(c.timeout)
            self._belief.confirm()
            self._belief.check_now()
            if not self.owned():
                raise LeaseLost("the %s %r came too late to be confirmed: %s" % (
                    self._what, self.name, self.lost_reason or "no fresh validity"))
        except BaseException:
            if channel is not None and self._thread is None:
                channel.close()
            self._abandon()
            raise
        return self

    def _open_stream(self, lease: str) -> Tuple[Any, DuplexChannel, float]:
        """The duplex hold's acquire: (grant, channel, ping interval).  An attempt that got
        no answer may have been granted: it is retried with a new lease (a second hold of
        the same lease would be let go when the first one's hang-up is), never with one the
        caller chose.  The lock an unanswered attempt was granted is let go by the service
        when no ping comes (within its ttl)."""
        c = self.client
        attempt = 0
        while True:
            call = _proto.hold_call(self._acquire_call(lease))
            deadline = time.monotonic() + c.timeout + call.wait
            try:
                head, body, sent, conn = c.transport.open_duplex(call, deadline)
                if conn is None:
                    if head.status // 100 == 2:
                        raise ProtocolError("HTTP %d to a duplex hold, without switching: a "
                                            "service without duplex holds?" % head.status,
                                            status=head.status)
                    _proto.answer(call, head.status, body, sent)    # raises the error
                    raise ProtocolError("HTTP %d to a duplex hold" % head.status,
                                        status=head.status)
                try:
                    line = c.transport.read_line(conn, deadline)
                    grant, interval = _proto.duplex_grant(call, line, sent)
                except BaseException:
                    conn.close()
                    raise
                return grant, DuplexChannel(conn), interval
            except Unreachable:
                attempt += 1
                if attempt > c.retries or self._lease is not None:
                    raise
                lease = new_lease()

    def _reenter(self: L) -> L:
        c = self.client
        # Never retried: a repeated reentrant acquire counts one more hold.
        g = c.execute(self._acquire_call(self.lease, reentrant=True))
        self.holds = g.holds
        return self

    def _abandon(self) -> None:
        """A grant not handed out: end the belief and let the lock go."""
        with self._mu:
            self._released = True
        if self._belief is not None:
            self._belief.end()
        self._release_wanted = True
        self._wake()
        if self.keepalive == "extend":
            self._join(self.client.timeout)
            try:
                self.client.execute(self._release_call(self.grant.lease))
            except RedlockError:
                pass

    # -- keeping it -------------------------------------------------------------------------
    def _wake(self) -> None:
        ch = self._channel
        if ch is not None:
            ch.wake()
        self._kick.set()

    def _run_stream(self, ch: DuplexChannel, session: DuplexSession) -> None:
        """The duplex hold's thread: runs the session (_duplex.py) on the connection."""
        try:
            while True:
                what, data, until = session.step(time.monotonic())
                if what == "stop":
                    break
                if what == "send":
                    ch.send(data, until)
                    continue
                line = ch.read_line(until)
                if line is None:
                    session.idle(time.monotonic())
                else:
                    session.line(line, time.monotonic())
        except EOFError:
            session.end("the stream ended")
        except (OSError, ProtocolError) as e:
            session.end("the stream failed: %s" % (e or type(e).__name__))
        finally:
            ch.close()
            self._answered.set()

    def _extend_once(self, timeout: float) -> Tuple[float, float]:
        """PATCH now (each name of a set): (the new deadline, the first send)."""
        if timeout <= 0:
            raise Unreachable("no time left to extend the %s %r" % (self._what, self.name))
        deadline = None
        first = None
        end = time.monotonic() + timeout
        for call in self._extend_calls(self.lease):
            ext = self.client.execute(call, timeout=max(0.001, end - time.monotonic()))
            sent = ext.deadline - ext.validity
            first = sent if first is None else first
            deadline = ext.deadline if deadline is None else min(deadline, ext.deadline)
        assert deadline is not None and first is not None
        return deadline, first

    def _run_extend(self, last_sent: float) -> None:
        """The extend keep-alive's thread: PATCH every ttl/3 (again soon after a failure),
        each call bounded by the lock's own deadline, until released or lost."""
        b = self._belief
        assert b is not None
        period = self.ttl / 3.0
        retry = min(0.1, period / 4)
        next_at = last_sent + period
        while True:
            self._kick.wait(max(0.0, min(next_at, b.core.lose_at) - time.monotonic()))
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
                deadline, sent = self._extend_once(min(self.client.timeout,
                                                       b.core.lose_at - now))
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
            # Lost (nothing left to count on): let it go now rather than at its expiry.
            # (release() does not, once lost: this is the one DELETE.)
            self._let_go_at = time.monotonic()
            try:
                self.client.execute(self._release_call(self.lease))
            except RedlockError:
                pass

    def extend(self) -> float:
        """Extend it now (a PATCH with the lease, whichever keep-alive keeps it); returns
        the seconds now left.  LeaseLost when it is not held."""
        self.check()
        b = self._belief
        assert b is not None
        try:
            deadline, _ = self._extend_once(min(self.client.timeout,
                                                b.core.lose_at - time.monotonic()))
        except LeaseLost as e:
            b.lose("the lease is gone (%s)" % e.message, lease_gone=True)
            raise
        b.extend_to(deadline)
        return self.remaining()

    def _join(self, timeout: float) -> None:
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    # -- release ----------------------------------------------------------------------------
    def release(self) -> None:
        """Release it ({"release":true} on a stream, a DELETE otherwise); a reentrant Lock
        held more than once gives one hold back.  A no-op when not held.  Raises LeaseLost
        if it was lost while held; with keepalive="extend" an error of the DELETE (the
        lease then lasts until its ttl ends).  release_confirmed says whether the service
        confirmed that the lock is free (False: it finishes the release itself, and the
        lock may stay taken until its ttl ends)."""
        c = self.client
        with self._mu:
            if self.grant is None or self._released:
                return
            if self.reentrant and self.holds > 1 and not self.lost.is_set():
                r = c.execute(self._release_call(self.lease))
                self.holds = r.holds if not r.released else 0
                if r.released:     # the service counted fewer holds than we did
                    self._released = True
                    self._belief.end()   # type: ignore[union-attr]
                    self._release_wanted = True
                    self._wake()
                return
            self._released = True
        b = self._belief
        assert b is not None
        b.check_now()      # its deadline, should the timer not have run yet (a pause)
        was_lost = not b.end()
        error: Optional[RedlockError] = None
        self._release_wanted = True
        self._wake()
        if not was_lost:
            self._join(c.timeout + 1.0)
            if self.keepalive == "extend":
                self._let_go_at = time.monotonic()
                try:
                    c.execute(self._release_call(self.lease))
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
            self._join(c.timeout + 1.0)
        self.holds = 0
        if was_lost:
            raise self._lost_error()
        if error is not None:
            raise error


class Permit(PermitCalls, Lock):
    """A permit of the semaphore `name` (of `permits`), held as a Lock is; see
    Client.semaphore().  Once acquired also: slot (0..permits-1), permits; fencing_token
    is the permit's (T*1024+slot)."""

    def __init__(self, client: Api, name: str, permits: int, *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, owner: Optional[str] = None,
                 lease: Optional[str] = None, keepalive: str = "stream",
                 on_lost: Optional[Callable[[], None]] = None):
        self.permits = self._check_permits(permits)
        Lock.__init__(self, client, name, ttl=ttl, wait=wait, owner=owner, lease=lease,
                      keepalive=keepalive, on_lost=on_lost)

    def locked(self) -> bool:
        """Whether every permit is taken now."""
        return self.client.semaphore_status(self.name).free == 0


class LockSet(SetCalls, Lock):
    """Several names held together (all or nothing) under one lease; see Client.locks().
    Once acquired: names, fencing_tokens (by name), modes (by name).  Kept alive by
    extensions of each name (the service has no streamed hold of a set)."""

    def __init__(self, client: Api, names: Iterable[str], *, ttl: Seconds = 30.0,
                 wait: Optional[Seconds] = None, lease: Optional[str] = None,
                 modes: Optional[Mapping[str, str]] = None,
                 on_lost: Optional[Callable[[], None]] = None):
        name = self._set_names(names, modes)
        Lock.__init__(self, client, name, ttl=ttl, wait=wait, lease=lease,
                      keepalive="extend", on_lost=on_lost)

    def locked(self) -> bool:
        """Whether any of the names is held now."""
        for n in self.names:
            st = self.client.status(n)
            if st.held or st.readers:
                return True
        return False
