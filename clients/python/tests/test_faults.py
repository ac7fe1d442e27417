"""test_faults.py -- what a holder believes when the network or the service misbehaves
(issue 29), and the loss paths (issue 27): the client must signal loss BEFORE anyone else
is granted the lock.

Through clients/stack.py's fault relay (in front of instance A) with a service-to-client
delay of 0, 0.15 and 0.8 s, a client holds a lock (both keep-alives, ttl 3 s); A is
SIGSTOPped (a VM pause) as soon as the client reports the grant; a second client polls
instance B until it is granted.  Then a trickle (the service's bytes one every 50 ms)
while A runs.  Then a cut of the relayed connections, a lease broken with force, and three
of five masters frozen.  Each scenario prints its margin (loss signalled -> the other's
grant, counted from the send of the request that was granted, which precedes it) to
stderr as "margin: ..."."""
import sys
import time
import unittest

import redlockd
from helpers import (RELAY_URL, TOKEN, URL, URL_B, Frozen, Poller, Relay, StoppedInstance,
                     require_stack, unique, wait_until)

TTL = 3.0


def report(what, margin):
    sys.stderr.write("margin: %-44s %+.3f s\n" % (what, margin))
    sys.stderr.flush()


class NoBelieverAfterANewHolder(unittest.TestCase):
    def setUp(self):
        require_stack(self)
        self.assertTrue(URL_B and RELAY_URL, "clients/stack.py without a relay or instance B")

    def _client(self):
        c = redlockd.Client(RELAY_URL, token=TOKEN, timeout=5)
        self.addCleanup(c.close)
        return c

    def _after(self, lock, poller, what):
        """B was granted: the lock must have been signalled lost before.  The grant lies
        between B's send and B's receipt of its answer.  Lost before the send: proven.
        Lost after the receipt: a believer beside a new holder.  In between (a few ms),
        the grant is explained only if the holder had already let the lock go (its
        release sent after the loss, before B's receipt): the lock's key could not have
        expired then, since it lasts at least to the deadline the holder counts, a margin
        after `lost` (what the paused-instance cases check strictly)."""
        try:
            self.assertTrue(poller.join(20), "B was not granted within 20 s")
            self.assertIsNone(poller.error)
            self.assertTrue(lock.lost.is_set(), "B holds %r and A's holder still believes "
                            "(%.3f s left)" % (lock.name, lock.remaining()))
            self.assertLess(lock.lost_at, poller.granted_recv,
                            "lost %.3f s after B's grant (%s)"
                            % (lock.lost_at - poller.granted_recv, lock.lost_reason))
            margin = poller.granted_send - lock.lost_at
            if margin <= 0:
                self.assertIsNotNone(lock.let_go_at, "lost during B's grant, not let go")
                self.assertTrue(lock.lost_at <= lock.let_go_at < poller.granted_recv)
                self.assertLess(poller.granted_recv, lock.deadline)
            self.assertLessEqual(lock.lost_at, lock.deadline)
            report(what, margin)
        finally:
            poller.stop()
            try:
                lock.release()
            except redlockd.LeaseLost:
                pass

    def _paused(self, keepalive, delay):
        name = unique("pause-%s-%d" % (keepalive, delay * 1000))
        with Relay() as relay, StoppedInstance(0) as a:
            relay.command("delay down %d" % (delay * 1000))
            lock = self._client().lock(name, ttl=TTL, keepalive=keepalive)
            lock.acquire()
            a.stop()                  # a VM pause, as soon as the client reports the grant
            self.assertFalse(lock.lost.is_set(), lock.lost_reason)
            self._after(lock, Poller(URL_B, name).start(),
                        "A paused, %s, delay %.2f s" % (keepalive, delay))

    def test_stream_paused_instance_delay_0(self):
        self._paused("stream", 0)

    def test_stream_paused_instance_delay_150ms(self):
        self._paused("stream", 0.15)

    def test_stream_paused_instance_delay_800ms(self):
        self._paused("stream", 0.8)

    def test_extend_paused_instance_delay_0(self):
        self._paused("extend", 0)

    def test_extend_paused_instance_delay_150ms(self):
        self._paused("extend", 0.15)

    def test_extend_paused_instance_delay_800ms(self):
        self._paused("extend", 0.8)

    def _trickled(self, keepalive):
        """The service's bytes one every 50 ms from just after the grant: no answer can be
        read within the validity, whatever each read's timeout."""
        name = unique("trickle-" + keepalive)
        with Relay() as relay:
            lock = self._client().lock(name, ttl=TTL, keepalive=keepalive)
            lock.acquire()
            relay.command("trickle down 50")
            self._after(lock, Poller(URL_B, name).start(), "trickle 50 ms/byte, " + keepalive)

    def test_stream_trickled_answers(self):
        self._trickled("stream")

    def test_extend_trickled_answers(self):
        self._trickled("extend")

    def test_stream_cut_by_the_relay(self):
        """Every relayed connection closed: the holder's stream ends, lost at once; the
        service lets the lock go once the validity it told has run out."""
        name = unique("cut")
        with Relay() as relay:
            lock = self._client().lock(name, ttl=TTL)
            lock.acquire()
            t = time.monotonic()
            relay.command("cut")
            self.assertTrue(lock.lost.wait(2), "not lost 2 s after the cut")
            self.assertLess(lock.lost_at - t, 1.0)
            self.assertIn("stream", lock.lost_reason)
            self._after(lock, Poller(URL_B, name).start(), "stream cut")

    def test_lease_broken_with_force(self):
        """An admin breaks the lock (DELETE ?force=true): the holder learns it (stream: a
        `released` line; extend: its next PATCH answers 404) and is not released again."""
        admin = redlockd.Client(URL, token=TOKEN)
        self.addCleanup(admin.close)
        holder = redlockd.Client(URL, token=TOKEN)
        self.addCleanup(holder.close)
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("force-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost):
                    with holder.lock(name, ttl=1.5, keepalive=keepalive) as lock:
                        r = admin.force_release(name)
                        self.assertEqual((r.released, r.forced), (True, True))
                        t = time.monotonic()
                        self.assertTrue(lock.lost.wait(1.5 / 3 + 1.0), "not lost after force")
                        self.assertLess(lock.lost_at - t, 1.5)
                        self.assertLess(lock.lost_at, lock.deadline)
                        # A newer holder's token is larger: the broken one is fenced off.
                        g = admin.acquire(name, ttl=1)
                        self.assertGreater(g.fencing_token, lock.fencing_token)
                        admin.release(name, g.lease)

    def test_lost_when_a_majority_of_masters_freezes(self):
        """Three of five masters stopped: the lock cannot be kept; lost is set before the
        validity known when the masters froze ends, and leaving the block raises
        LeaseLost."""
        client = redlockd.Client(URL, token=TOKEN)
        self.addCleanup(client.close)
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("freeze-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost) as cm:
                    with client.lock(name, ttl=2, keepalive=keepalive) as lock:
                        with Frozen(3):
                            frozen_at = time.monotonic()
                            deadline = lock.deadline
                            self.assertTrue(lock.lost.wait(5), "lost not set in 5 s")
                            self.assertLess(lock.lost_at, deadline + 1e-9)
                            self.assertGreater(lock.lost_at - frozen_at, 0.1)
                            self.assertRaises(redlockd.LeaseLost, lock.check)
                self.assertIn(name, str(cm.exception))
                g = wait_until(lambda: self._try_acquire(client, name), 10, "a new grant")
                self.assertGreater(g.fencing_token, lock.fencing_token)
                client.release(name, g.lease)

    @staticmethod
    def _try_acquire(client, name):
        try:
            return client.acquire(name, ttl=2)
        except (redlockd.LockHeld, redlockd.ServiceUnavailable):
            return None


if __name__ == "__main__":
    unittest.main()
