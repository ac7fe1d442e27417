"""_duplex.py -- the client's side of a duplex streamed hold (docs/DESIGN.md section 10),
without I/O: what to send, what to wait for, and what each line means for the belief.
The blocking client (lock.py) and the asyncio one (aio_lock.py) each run it with their
own I/O, in one loop:

    while True:
        what, data, until = session.step(time.monotonic())
        "send":  write data (before `until`)
        "read":  read a line until `until` (or a wake-up): session.line(line), or
                 session.idle(now) when none came
        "stop":  close the connection
    and session.end(why) when the connection ends or fails.

The protocol: ping n right after the grant, the next one `interval` after the previous
one's send and never before its answer is read (one ping in flight); `alive` n carries
a validity counted from ping n's send; `{"release":true}` when the holder releases, or
when the belief is lost (nothing left to count on: the service may let it go now rather
than at silence); after `released`/`lost` nothing more counts."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from . import _proto


class DuplexSession:
    def __init__(self, belief: Any, interval: float, timeout: float,
                 release_wanted: Callable[[], bool], answered: Callable[[], None]):
        self.belief = belief            # a Belief of _belief.py (or aio_lock's)
        self.interval = interval
        self.timeout = timeout
        self._release_wanted = release_wanted
        self._answered = answered
        self.n = 0
        self.inflight: Optional[Tuple[int, float]] = None    # (ping, its send)
        self.next_ping = 0.0            # right away
        self.release_sent = False
        self.final_until = 0.0
        self.let_go_at: Optional[float] = None
        self.release_confirmed: Optional[bool] = None
        self.done = False

    def step(self, now: float) -> Tuple[str, bytes, float]:
        b = self.belief.core
        if self.done:
            return "stop", b"", now
        if not self.release_sent and (self._release_wanted() or (
                b.is_lost and not b.lease_gone)):
            self.release_sent = True
            self.let_go_at = now
            self.final_until = now + self.timeout
            return "send", _proto.RELEASE_LINE, self.final_until
        if b.is_lost and b.lease_gone:
            return "stop", b"", now
        if self.release_sent:
            if now >= self.final_until:
                return "stop", b"", now
            return "read", b"", self.final_until
        if self.inflight is None:
            if now >= self.next_ping:
                # `now` was taken before the write: it precedes the answer's round.
                self.n += 1
                self.inflight = (self.n, now)
                return "send", _proto.ping_line(self.n), now + self.timeout
            return "read", b"", self.next_ping
        if b.pending:
            return "read", b"", now + self.timeout
        return "read", b"", max(b.lose_at, now + 0.001)

    def idle(self, now: float) -> None:
        """No line came by `until` (or a wake-up): apply the deadline here too."""
        if not self.release_sent and self.belief.core.due(now):
            self.belief.check_now()

    def line(self, line: bytes, now: float) -> None:
        if not line.strip():
            return
        b = self.belief
        kind, doc = _proto.hold_event(line)
        if kind == "alive":
            if self.inflight is not None and doc["ping"] == self.inflight[0]:
                sent_at = self.inflight[1]
                self.inflight = None
                if b.extend_to(sent_at + doc["validity_ms"] / 1000.0):
                    self._answered()
                self.next_ping = max(sent_at + self.interval, now)
            elif not self.release_sent:
                b.lose("an answer to a ping not in flight: %r" % line[:200])
            return
        if self.release_sent:
            self.release_confirmed = kind == "released"
            self.done = True
            return
        if kind == "released":
            b.lose(_proto.event_reason(kind, doc), lease_gone=True)
            self.done = True
            return
        # lost (no_quorum, shutting_down, bad_message: the service waits for a release,
        # sent next), lease_lost (nothing left), or a line that is not the protocol's.
        b.lose(_proto.event_reason(kind, doc),
               lease_gone=kind == "lost" and doc.get("reason") == "lease_lost")

    def end(self, why: str) -> None:
        """The connection ended (or failed): lost, unless we were releasing."""
        self.done = True
        if not self.release_sent:
            self.belief.lose(why)
