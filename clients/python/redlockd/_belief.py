"""_belief.py -- what a holder believes, and the local timer that ends the belief.

A held lock's belief is a deadline (time.monotonic()): the latest end of the validities
it was told, each counted from the send of the request (or ping) whose round produced it.
It ends -- `lost` -- a margin before that deadline (loss_margin) unless a later validity
came, or at once when the service or the connection says so.  The end is a timer: one
thread of this module (blocking client) or the event loop's call_at (asyncio), never a
read or a write, so no slow or stuck network call, and no name lookup, can delay it.
BeliefCore is the state (no threads, no loop); Belief adds the blocking client's timer
and threading.Event; AsyncBelief the asyncio client's (the loop's timer, asyncio.Event)."""
from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import threading
import time
from typing import Any, Callable, List, Optional, Tuple


class BeliefCore:
    """The state of one belief: deadline, margin, and how it ended (lost with a reason,
    or released by its holder: `ended`)."""

    def __init__(self, deadline: float, margin: float, pending: bool = False):
        self.deadline = deadline
        self.margin = margin
        # Not handed out yet: a grant that came late waits for a fresh validity, and its
        # old one running out meanwhile is not a loss (nobody counts on it yet).
        self.pending = pending
        self.is_lost = False
        self.lost_at: Optional[float] = None   # time.monotonic() when it was lost
        self.reason: Optional[str] = None
        self.lease_gone = False     # the service said the lease is gone: nothing to release
        self.ended = False          # released (or being released) by its holder

    @property
    def lose_at(self) -> float:
        return self.deadline - self.margin

    @property
    def done(self) -> bool:
        return self.is_lost or self.ended

    def extend_to(self, deadline: float) -> bool:
        """A validity counted from a moment that preceded its round: the belief lasts to
        the latest such end.  False once the belief is over (it does not come back)."""
        if self.done:
            return False
        if deadline > self.deadline:
            self.deadline = deadline
        return True

    def lose(self, reason: str, lease_gone: bool = False) -> bool:
        """End the belief as lost; True the first time."""
        if self.done:
            return False
        self.is_lost = True
        self.lost_at = time.monotonic()
        self.reason = reason
        self.lease_gone = lease_gone
        return True

    def lost_at_release(self, reason: str) -> None:
        """The release found the lease gone: it was lost while believed held (the
        belief already ended with the release)."""
        if not self.is_lost:
            self.is_lost = True
            self.lost_at = time.monotonic()
            self.reason = reason
            self.lease_gone = True

    def due(self, now: float) -> bool:
        return not self.done and not self.pending and now >= self.lose_at


class _Timers:
    """One daemon thread that calls functions at time.monotonic() moments; a function
    must not block (Belief's only sets an Event and starts a callback's thread)."""

    def __init__(self) -> None:
        self._heap: List[Tuple[float, int, Callable[[], None]]] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._thread: Optional[threading.Thread] = None

    def at(self, when: float, fn: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._heap, (when, next(self._seq), fn))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="redlockd-loss-timer")
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while True:
                    if not self._heap:
                        self._cv.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._cv.wait(wait)
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:   # a bug in a belief's check must not stop every timer
                pass


TIMERS = _Timers()


class Belief:
    """A belief with the blocking client's timer: `lost` (a threading.Event) is set at
    lose_at unless extended, or by lose(); on_lost callbacks run in a thread of their own
    (so that one that blocks delays nobody else's signal); wake() is called (from the
    timer thread, quickly) so that the keeper of the lock can act on the loss."""

    def __init__(self, deadline: float, margin: float, lost: threading.Event,
                 on_lost: Optional[Callable[[], None]] = None,
                 wake: Optional[Callable[[], None]] = None, pending: bool = False):
        self.core = BeliefCore(deadline, margin, pending)
        self.lost = lost
        self._mu = threading.Lock()
        self._on_lost = on_lost
        self._wake = wake
        if not pending:
            TIMERS.at(self.core.lose_at, self._check)

    def confirm(self) -> None:
        """A pending belief is handed out: its timer starts (and fires at once if the
        validity it has is already over)."""
        with self._mu:
            if not self.core.pending:
                return
            self.core.pending = False
        TIMERS.at(self.core.lose_at, self._check)

    @property
    def deadline(self) -> float:
        return self.core.deadline

    def _check(self, rearm: bool = True) -> None:
        with self._mu:
            if self.core.done or self.core.pending:
                return
            if not self.core.due(time.monotonic()):
                if rearm:
                    TIMERS.at(self.core.lose_at, self._check)
                return
            self.core.lose("the validity ran out with no new word from the service")
        self._signal()

    def extend_to(self, deadline: float) -> bool:
        with self._mu:
            return self.core.extend_to(deadline)

    def lose(self, reason: str, lease_gone: bool = False) -> bool:
        with self._mu:
            if not self.core.lose(reason, lease_gone):
                return False
        self._signal()
        return True

    def end(self) -> bool:
        """The holder releases: the belief ends without a loss.  False when it was lost
        before."""
        with self._mu:
            if self.core.is_lost:
                return False
            self.core.ended = True
            return True

    def check_now(self) -> None:
        """Apply the deadline now (the timer thread may not have run yet)."""
        self._check(rearm=False)

    def _signal(self) -> None:
        self.lost.set()
        if self._wake is not None:
            self._wake()
        if self._on_lost is not None:
            threading.Thread(target=self._on_lost, daemon=True,
                             name="redlockd-on-lost").start()


class AsyncBelief:
    """A belief timed by the asyncio loop (call_later): `lost` (an asyncio.Event) set at
    lose_at unless extended, or by lose(); on_lost, a plain function (called by the loop)
    or a coroutine function (run as a task)."""

    def __init__(self, deadline: float, margin: float, lost: asyncio.Event,
                 on_lost: Optional[Callable[[], Any]], wake: Callable[[], None],
                 pending: bool = False):
        self.core = BeliefCore(deadline, margin, pending)
        self.lost = lost
        self._on_lost = on_lost
        self._wake = wake
        self._loop = asyncio.get_running_loop()
        self._handle: Optional[asyncio.TimerHandle] = None
        if not pending:
            self._arm()

    def _arm(self) -> None:
        self._handle = self._loop.call_later(max(0.0, self.core.lose_at - time.monotonic()),
                                             self._check)

    def confirm(self) -> None:
        if self.core.pending:
            self.core.pending = False
            self._arm()

    @property
    def deadline(self) -> float:
        return self.core.deadline

    def _check(self, rearm: bool = True) -> None:
        if self.core.done or self.core.pending:
            return
        if not self.core.due(time.monotonic()):
            if rearm:
                self._arm()
            return
        self.core.lose("the validity ran out with no new word from the service")
        self._signal()

    def check_now(self) -> None:
        self._check(rearm=False)

    def extend_to(self, deadline: float) -> bool:
        return self.core.extend_to(deadline)

    def lose(self, reason: str, lease_gone: bool = False) -> bool:
        if not self.core.lose(reason, lease_gone):
            return False
        self._signal()
        return True

    def end(self) -> bool:
        if self.core.is_lost:
            return False
        self.core.ended = True
        if self._handle is not None:
            self._handle.cancel()
        return True

    def _signal(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self.lost.set()
        self._wake()
        cb = self._on_lost
        if cb is not None:
            if inspect.iscoroutinefunction(cb):
                self._loop.create_task(cb())   # type: ignore[arg-type]
            else:
                self._loop.call_soon(cb)
