"""test_client.py -- the blocking client against the real bin/redlockd and 5 real
redis-server masters (clients/stack.py starts them):

    python3 clients/stack.py -- clients/python/test.sh      (what make test-clients runs)

Every method of Client, Lock, Permit, LockSet and Election.  unittest, standard library
only; every wait is a condition with a deadline."""
import datetime
import os
import re
import threading
import time
import unittest

import redlockd
from helpers import (OPENAPI, RELAY_URL, TOKEN, URL, Relay, SwallowingProxy, host_port,
                     metric, require_stack, unique, wait_until)

def openapi_error_codes():
    with open(OPENAPI) as f:
        text = f.read()
    m = re.search(r"\n    Error:\n(.*?)\n    \S", text, re.S)
    assert m, "no components.schemas.Error in " + OPENAPI
    enum = re.search(r"\n( +)enum:\n((?:\1  - \S+\n)+)", m.group(1) + "\n")
    assert enum, "no enum in the Error schema"
    return re.findall(r"- (\S+)", enum.group(2))


class Base(unittest.TestCase):
    def setUp(self):
        require_stack(self)
        self.client = redlockd.Client(URL, token=TOKEN, timeout=10)
        self.addCleanup(self.client.close)

    def new_client(self, url=URL, **kw):
        kw.setdefault("token", TOKEN)
        c = redlockd.Client(url, **kw)
        self.addCleanup(c.close)
        return c

    def in_thread(self, fn):
        """Run fn in a thread; (thread, results, errors)."""
        got, errors = [], []

        def run():
            try:
                got.append(fn())
            except Exception as e:   # reported by the caller
                errors.append(e)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, got, errors

    def parked_waiter(self, fn):
        """Run fn (an acquire that waits) in a thread and wait until the service parks it."""
        parked = metric("redlockd_parked_waiters")
        t, got, errors = self.in_thread(fn)
        wait_until(lambda: metric("redlockd_parked_waiters") > parked or errors or got, 10,
                   "the waiter to be parked")
        self.assertFalse(errors or got, "the waiter did not wait: %r" % (errors or got))
        return t, got, errors


class Errors(Base):
    def test_error_codes_are_the_documents(self):
        """ERRORS names exactly the codes of api/openapi.yaml's Error schema."""
        codes = openapi_error_codes()
        self.assertGreater(len(codes), 20)
        self.assertEqual(sorted(redlockd.ERRORS), sorted(codes))

    def test_error_classes(self):
        e = redlockd.errors.error_from_reply(409, {"error": "lock_held", "message": "m",
                                                   "retry_after_ms": 1500})
        self.assertIsInstance(e, redlockd.LockHeld)
        self.assertEqual(e.retry_after, 1.5)
        e = redlockd.errors.error_from_reply(503, {"error": "quorum_unavailable",
                                                   "message": "m", "nodes_ok": 2, "quorum": 3})
        self.assertIsInstance(e, redlockd.QuorumUnavailable)
        self.assertEqual((e.nodes_ok, e.quorum), (2, 3))
        e = redlockd.errors.error_from_reply(503, {"error": "release_unconfirmed",
                                                   "message": "m", "nodes_ok": 2, "quorum": 3})
        self.assertIsInstance(e, redlockd.ReleaseUnconfirmed)
        self.assertIsInstance(e, redlockd.QuorumUnavailable)
        self.assertEqual((e.nodes_ok, e.quorum), (2, 3))
        e = redlockd.errors.error_from_reply(503, {"error": "masters_quarantined",
                                                   "message": "m", "nodes_ok": 2, "quorum": 3,
                                                   "quarantined": 1, "rejoin_ms": 2500})
        self.assertIsInstance(e, redlockd.MastersQuarantined)
        self.assertEqual((e.nodes_ok, e.quarantined, e.rejoin), (2, 1, 2.5))
        # A code newer than the client is judged by its status.
        e = redlockd.errors.error_from_reply(503, {"error": "brand_new", "message": "m"})
        self.assertIsInstance(e, redlockd.ServiceUnavailable)
        self.assertEqual(e.code, "brand_new")

    def test_unauthorized_and_invalid(self):
        for token in (None, "not-the-token-0123456789"):
            c = redlockd.Client(URL, token=token)
            self.addCleanup(c.close)
            if token is None:
                c.transport.token = None    # not $REDLOCK_TOKEN either
            with self.assertRaises(redlockd.Unauthorized) as cm:
                c.acquire(unique("auth"), ttl=1)
            self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
            self.assertNotIsInstance(cm.exception, redlockd.Forbidden)
        with self.assertRaises(redlockd.InvalidRequest) as cm:
            self.client.acquire(unique("bad"), ttl=0)
        self.assertEqual(cm.exception.code, "invalid_ttl")
        with self.assertRaises(redlockd.InvalidRequest) as cm:
            self.client.acquire("no spaces allowed", ttl=1)
        self.assertEqual(cm.exception.code, "invalid_name")
        with self.assertRaises(ValueError):
            self.client.acquire(unique("neg"), ttl=-1)
        with self.assertRaises(TypeError):
            self.client.acquire(unique("str"), ttl="10")

    def test_unreachable(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()       # nothing listens there now
        c = self.new_client("http://127.0.0.1:%d" % port, timeout=2)
        t = time.monotonic()
        with self.assertRaises(redlockd.Unreachable):
            c.acquire(unique("nowhere"), ttl=1)
        self.assertLess(time.monotonic() - t, 2)


class PlainCalls(Base):
    def test_acquire_status_extend_release(self):
        name = unique("plain")
        g = self.client.acquire(name, ttl=10, owner="py-test pid %d" % os.getpid())
        self.assertEqual(g.name, name)
        self.assertEqual(len(g.lease), 32)
        self.assertEqual(g.ttl, 10.0)
        self.assertGreater(g.validity, 9)
        self.assertGreater(g.remaining(), 8)
        st = self.client.status(name)
        self.assertTrue(st.held)
        self.assertEqual(st.owner, "py-test pid %d" % os.getpid())
        self.assertEqual(st.fencing_token, g.fencing_token)
        self.assertIsNone(st.holds)          # only asked with the lease
        self.assertEqual(self.client.status(name, lease=g.lease).holds, 1)
        ext = self.client.extend(name, g.lease, ttl=datetime.timedelta(seconds=20))
        self.assertEqual(ext.fencing_token, g.fencing_token)
        self.assertGreater(ext.validity, 19)
        self.assertGreater(self.client.status(name).validity, 10)
        r = self.client.release(name, g.lease)
        self.assertEqual((r.released, r.holds, r.forced), (True, 0, False))
        self.assertFalse(self.client.status(name).held)
        with self.assertRaises(redlockd.LeaseLost) as cm:
            self.client.release(name, g.lease)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "lease_not_found"))
        with self.assertRaises(redlockd.LeaseLost):
            self.client.extend(name, g.lease)
        g2 = self.client.acquire(name, ttl=1)
        self.assertGreater(g2.fencing_token, g.fencing_token)
        self.client.release(name, g2.lease)

    def test_lock_held_says_when_to_retry(self):
        name = unique("held")
        g = self.client.acquire(name, ttl=20)
        try:
            with self.assertRaises(redlockd.LockHeld) as cm:
                self.client.acquire(name, ttl=1)
            e = cm.exception
            self.assertEqual((e.status, e.code), (409, "lock_held"))
            self.assertTrue(0 < e.retry_after <= 20, e.retry_after)
            with self.assertRaises(redlockd.LockHeld):
                with self.client.lock(name, ttl=1):
                    self.fail("entered a lock another lease holds")
        finally:
            self.client.release(name, g.lease)

    def test_watch_and_changes(self):
        name = unique("watch")
        st = self.client.status(name)
        self.assertFalse(st.held)
        def watcher():
            # A change may be spurious (the API allows it: another name of the bucket,
            # a master that did not answer): watch on until the lock shows held.
            w = self.client.watch(name, st.index, 20)
            while not w.held:
                w = self.client.watch(name, w.index, 20)
            return w
        t, got, errors = self.in_thread(watcher)
        # No race with the watch's start: it answers as soon as the index is not st's.
        g = self.client.acquire(name, ttl=5)
        t.join(15)
        self.assertFalse(errors, errors)
        self.assertTrue(got[0].held)
        self.assertNotEqual(got[0].index, st.index)
        # Nothing changes: the same index after the wait.
        t0 = time.monotonic()
        same = self.client.watch(name, got[0].index, 0.3)
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)
        self.assertEqual(same.index, got[0].index)
        # changes(): now, then each change.
        seen = []
        it = self.client.changes(name, wait=10)
        seen.append(next(it))
        self.client.release(name, g.lease)
        seen.append(next(it))
        while seen[-1].held:          # a spurious change first
            seen.append(next(it))
        self.assertEqual([seen[0].held, seen[-1].held], [True, False])
        with self.assertRaises(ValueError):
            redlockd._proto.status(name, wait=1)

    def test_list_locks(self):
        base = unique("list") + "/"
        grants = [self.client.acquire(base + n, ttl=10, owner="o-" + n) for n in "cab"]
        try:
            lst = self.client.list_locks(base)
            self.assertEqual(lst.prefix, base)
            self.assertEqual([x.name for x in lst.locks], [base + n for n in "abc"])
            self.assertEqual([x.owner for x in lst.locks], ["o-a", "o-b", "o-c"])
            self.assertFalse(lst.truncated)
            self.assertTrue(all(x.validity > 5 and x.fencing_token >= 1 for x in lst.locks))
            two = self.client.list_locks(base, limit=2)
            self.assertEqual(len(two.locks), 2)
            self.assertTrue(two.truncated)
        finally:
            for g in grants:
                self.client.release(g.name, g.lease)
        self.assertEqual(self.client.list_locks(base).locks, ())

    def test_force_release(self):
        name = unique("force")
        g = self.client.acquire(name, ttl=30)
        r = self.client.force_release(name)
        self.assertEqual((r.name, r.released, r.forced), (name, True, True))
        self.assertFalse(self.client.status(name).held)
        with self.assertRaises(redlockd.LeaseLost):
            self.client.extend(name, g.lease)

    def test_probes(self):
        h = self.client.health()
        self.assertTrue(h.ready)
        self.assertEqual((h.quorum, len(h.masters)), (3, 5))
        r = self.client.ready()
        self.assertTrue(r.ready and all(m.ok and m.state == "ready" for m in r.masters))
        self.assertTrue(all(m.latency is not None and m.latency < 1 for m in r.masters))
        self.assertIn("redlockd_build_info", self.client.metrics())

    def test_acquire_without_answer_is_retried_with_the_same_lease(self):
        """The first POST's 201 never reaches the client: it times out and sends the
        POST again with its lease, and gets the grant the first attempt made (not 409)."""
        host, port = host_port(URL)
        for retries in (1, 0):
            name = unique("retry")
            proxy = SwallowingProxy(host, port)
            self.addCleanup(proxy.close)
            c = self.new_client("http://127.0.0.1:%d" % proxy.port, timeout=1.5,
                                retries=retries)
            if retries == 0:
                with self.assertRaises(redlockd.Unreachable):
                    c.acquire(name, ttl=10)
                # The grant was made all the same, for a lease nobody knows: this is what
                # retrying with the same lease is for.
                self.assertTrue(proxy.swallowed.is_set())
                self.assertTrue(self.client.status(name).held)
                continue
            g = c.acquire(name, ttl=10)
            self.assertTrue(proxy.swallowed.is_set(), "the first answer was not swallowed")
            self.assertEqual(proxy.connections, 2)
            st = self.client.status(name)
            self.assertTrue(st.held)
            self.assertEqual(st.fencing_token, g.fencing_token)
            again = self.client.acquire(name, ttl=10, lease=g.lease)
            self.assertEqual(again.fencing_token, g.fencing_token)
            self.client.release(name, g.lease)

    def test_keep_alive_pool(self):
        """One connection carries many calls; one the other side closed is replaced."""
        c = self.new_client(RELAY_URL)
        name = unique("pool")
        for _ in range(20):
            c.status(name)
        self.assertEqual(c.transport.connects, 1)
        with Relay() as relay:
            relay.command("cut")      # closes the pooled connection from the other side
            wait_until(lambda: c.transport._idle and c.transport._idle[0].stale(), 5,
                       "the pooled connection to be closed")
            self.assertFalse(c.status(name).held)
        self.assertEqual(c.transport.connects, 2)

    def test_default_url_from_the_environment(self):
        old = os.environ.get("REDLOCK_URL")
        try:
            os.environ["REDLOCK_URL"] = URL
            self.assertEqual(redlockd.Client(token=TOKEN).url, URL)
            del os.environ["REDLOCK_URL"]
            self.assertEqual(redlockd.Client().url, "http://127.0.0.1:8080")
        finally:
            if old is not None:
                os.environ["REDLOCK_URL"] = old
        with self.assertRaises(ValueError):
            redlockd.Client("ftp://x")
        with self.assertRaises(ValueError):
            redlockd.Client(URL, ca_file="/dev/null")     # TLS options for http://


class Locks(Base):
    def test_lock_is_kept_alive_past_its_ttl(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("keep-" + keepalive)
                with self.client.lock(name, ttl=1, keepalive=keepalive) as lock:
                    self.assertEqual(len(lock.lease), 32)
                    self.assertTrue(lock.owned())
                    self.assertTrue(lock.locked())
                    # Hold it for three ttls: lost must stay clear, the lock held.
                    self.assertFalse(lock.lost.wait(2.5), lock.lost_reason)
                    st = self.client.status(name)
                    self.assertTrue(st.held)
                    self.assertEqual(st.fencing_token, lock.fencing_token)
                    self.assertGreater(lock.remaining(), 0)
                    lock.check()
                    self.assertGreater(lock.extend(), 0.5)
                token = lock.fencing_token
                self.assertFalse(lock.owned())
                self.assertTrue(lock.release_confirmed)
                self.assertFalse(self.client.status(name).held, "not released at exit")
                g = self.client.acquire(name, ttl=1)
                self.assertGreater(g.fencing_token, token)
                self.client.release(name, g.lease)

    def test_lock_waits_for_the_holder(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("wait-" + keepalive)
                holder = self.client.acquire(name, ttl=30)

                def waiter():
                    with self.client.lock(name, ttl=5, wait=20, owner="waiter",
                                          keepalive=keepalive) as lock:
                        return lock.fencing_token, self.client.status(name)
                t, got, errors = self.parked_waiter(waiter)
                self.client.release(name, holder.lease)
                t.join(15)
                self.assertFalse(errors, errors)
                token, st = got[0]
                self.assertGreater(token, holder.fencing_token)
                self.assertEqual((st.held, st.owner, st.fencing_token), (True, "waiter", token))

    def test_a_late_grant_is_confirmed_before_it_is_handed_out(self):
        """A grant that comes after a long wait has little validity left counted from the
        request's send: the lock gets a fresh one (an answered ping, an extension)
        before acquire() returns."""
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("late-" + keepalive)
                self.client.acquire(name, ttl=1.5)     # left to expire
                with self.client.lock(name, ttl=1, wait=5, keepalive=keepalive) as lock:
                    self.assertGreater(time.monotonic() - (lock.grant.deadline -
                                                           lock.grant.validity), 1.0)
                    self.assertLess(lock.grant.remaining(), lock.validity / 2)
                    self.assertTrue(lock.owned())
                    self.assertGreater(lock.remaining(), 0.5)

    def test_lock_wait_runs_out(self):
        name = unique("wait-out")
        holder = self.client.acquire(name, ttl=30)
        try:
            t0 = time.monotonic()
            with self.assertRaises(redlockd.LockHeld) as cm:
                with self.client.lock(name, ttl=1, wait=0.4):
                    self.fail("entered a held lock")
            self.assertGreaterEqual(time.monotonic() - t0, 0.39)
            self.assertGreater(cm.exception.retry_after, 25)
        finally:
            self.client.release(name, holder.lease)

    def test_lock_lost_when_someone_else_releases_it(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("stolen-" + keepalive)
                called = threading.Event()
                with self.assertRaises(redlockd.LeaseLost):
                    with self.client.lock(name, ttl=0.9, keepalive=keepalive,
                                          on_lost=called.set) as lock:
                        self.client.release(name, lock.lease)     # from "elsewhere"
                        self.assertTrue(lock.lost.wait(3), "lost not set")
                        self.assertTrue(called.wait(3), "on_lost not called")
                        self.assertRaises(redlockd.LeaseLost, lock.check)
                self.assertFalse(self.client.status(name).held)

    def test_body_exception_wins_and_lock_is_released(self):
        name = unique("raise")
        with self.assertRaises(KeyError):
            with self.client.lock(name, ttl=5):
                raise KeyError("from the body")
        self.assertFalse(self.client.status(name).held)

    def test_lock_with_a_chosen_lease_and_owner(self):
        name = unique("chosen")
        lease = redlockd.new_lease()
        with self.client.lock(name, ttl=3, lease=lease, owner="me") as lock:
            self.assertEqual(lock.lease, lease)
            self.assertEqual(self.client.status(name).owner, "me")
            # A retry of the same acquire (same lease) is the same grant.
            self.assertEqual(self.client.acquire(name, ttl=3, lease=lease).fencing_token,
                             lock.fencing_token)
        with self.assertRaises(RuntimeError):
            lock.acquire()            # a Lock is acquired once

    def test_reentrant(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("rlock-" + keepalive)
                with self.client.rlock(name, ttl=1, keepalive=keepalive) as lock:
                    token = lock.fencing_token
                    with lock:
                        self.assertEqual(lock.holds, 2)
                        self.assertEqual(self.client.status(name, lease=lock.lease).holds, 2)
                        self.assertEqual(lock.fencing_token, token)
                        self.assertFalse(lock.lost.wait(1.2), lock.lost_reason)
                    self.assertEqual(lock.holds, 1)
                    self.assertTrue(self.client.status(name).held)
                self.assertFalse(self.client.status(name).held)
        # The plain calls: one more hold, one back.
        name = unique("reentrant-plain")
        g = self.client.acquire(name, ttl=10)
        g2 = self.client.acquire(name, ttl=10, lease=g.lease, reentrant=True)
        self.assertEqual((g2.holds, g2.fencing_token), (2, g.fencing_token))
        r = self.client.release(name, g.lease)
        self.assertEqual((r.released, r.holds), (False, 1))
        self.assertTrue(self.client.release(name, g.lease).released)
        with self.assertRaises(ValueError):
            self.client.lock(name, shared=True, reentrant=True)

    def test_readers_hold_at_once_and_keep_a_writer_out(self):
        """Four readers (ttl 1 s) hold the name at once for more than two ttls; a
        writer is refused meanwhile, and granted, with a larger token, once they left."""
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                self._readers(unique("readers-" + keepalive), 4, keepalive)

    def _readers(self, name, n, keepalive):
        held, errors = [], []
        done = threading.Event()

        def reader():
            try:
                with self.client.lock(name, ttl=1, shared=True, keepalive=keepalive) as r:
                    held.append(r)
                    done.wait(20)
            except Exception as e:   # reported below
                errors.append(e)
        threads = [threading.Thread(target=reader) for _ in range(n)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(held) == n or errors, 10, "%d readers" % n)
            self.assertFalse(errors, errors)
            until = time.monotonic() + 2.2
            for r in held:
                self.assertFalse(r.lost.wait(max(0.0, until - time.monotonic())),
                                 r.lost_reason)
                self.assertTrue(r.shared and r.grant.shared)
            st = self.client.status(name)
            self.assertEqual((st.held, st.readers, st.shared), (False, n, True))
            self.assertEqual({r.fencing_token for r in held}, {st.fencing_token})
            with self.assertRaises(redlockd.LockHeld):
                self.client.acquire(name, ttl=1)
        finally:
            done.set()
            for t in threads:
                t.join(15)
        self.assertFalse(errors, errors)
        self.assertEqual(self.client.status(name).readers, 0, "readers not released at exit")
        g = self.client.acquire(name, ttl=1)
        self.assertGreater(g.fencing_token, held[0].fencing_token)
        self.client.release(name, g.lease)

    def test_shared_plain_calls_and_a_waiting_writer(self):
        name = unique("shared-plain")
        r1 = self.client.acquire(name, ttl=10, shared=True)
        r2 = self.client.acquire(name, ttl=10, shared=True)
        self.assertTrue(r1.shared and r2.shared)
        self.assertNotEqual(r1.lease, r2.lease)
        self.assertGreater(self.client.extend(name, r1.lease, ttl=20).validity, 10)
        self.assertEqual(self.client.status(name).readers, 2)
        t, got, errors = self.parked_waiter(lambda: self.client.acquire(name, ttl=5, wait=15))
        self.client.release(name, r1.lease)
        self.assertFalse(got, "the writer was granted beside a reader")
        self.client.release(name, r2.lease)
        t.join(15)
        self.assertFalse(errors, errors)
        self.assertFalse(got[0].shared)
        self.assertGreater(got[0].fencing_token, r1.fencing_token)
        st = self.client.status(name)
        self.assertEqual((st.held, st.readers), (True, 0))
        self.client.release(name, got[0].lease)


class Sets(Base):
    def test_acquire_many_and_release_many(self):
        a, b = unique("set-a"), unique("set-b")
        g = self.client.acquire_many([a, b], ttl=10, modes={b: "shared"})
        self.assertEqual(g.names, (a, b))
        self.assertEqual(g.modes, {a: "exclusive", b: "shared"})
        self.assertGreater(g.fencing_tokens[a], 0)
        self.assertTrue(self.client.status(a).held)
        self.assertEqual(self.client.status(b).readers, 1)
        with self.assertRaises(redlockd.LockHeld):
            self.client.acquire_many([unique("set-c"), a], ttl=1)
        self.assertGreater(self.client.extend(a, g.lease, 20).validity, 10)
        r = self.client.release_many(g.lease)
        self.assertEqual((set(r.names), r.released), ({a, b}, True))
        self.assertFalse(self.client.status(a).held)
        with self.assertRaises(redlockd.LeaseLost):
            self.client.release_many(g.lease)

    def test_lock_set_kept_and_lost(self):
        a, b = unique("lset-a"), unique("lset-b")
        with self.client.locks([a, b], ttl=1, modes={b: "shared"}) as s:
            self.assertEqual(set(s.fencing_tokens), {a, b})
            with self.assertRaises(AttributeError):
                s.fencing_token
            self.assertTrue(s.locked())
            self.assertFalse(s.lost.wait(2.2), s.lost_reason)
            self.assertTrue(self.client.status(a).held)
            self.assertEqual(self.client.status(b).readers, 1)
        self.assertFalse(self.client.status(a).held or self.client.status(b).readers)
        with self.assertRaises(redlockd.LeaseLost):
            with self.client.locks([a, b], ttl=1) as s:
                self.client.force_release(a)
                self.assertTrue(s.lost.wait(2), "a set losing a name is not lost")
        self.assertFalse(self.client.status(b).held)


class Semaphores(Base):
    def test_semaphore_of_two_refuses_a_third_and_hands_a_permit_to_a_waiter(self):
        name = unique("sem")
        p1 = self.client.acquire_permit(name, 2, ttl=10)
        p2 = self.client.acquire_permit(name, 2, ttl=10)
        self.assertEqual({p1.slot, p2.slot}, {0, 1})
        self.assertEqual((p1.permits, p2.permits), (2, 2))
        for p in (p1, p2):
            self.assertEqual(p.fencing_token % 1024, p.slot)
        with self.assertRaises(redlockd.LockHeld) as cm:
            self.client.acquire_permit(name, 2, ttl=10)
        self.assertGreater(cm.exception.retry_after, 5)
        self.assertEqual(self.client.semaphore_status(name),
                         redlockd.SemaphoreStatus(name=name, permits=2, held=2, free=0))
        t, got, errors = self.parked_waiter(
            lambda: self.client.acquire_permit(name, 2, ttl=10, wait=15))
        self.client.release_permit(name, p1.lease)
        t.join(15)
        self.assertFalse(errors, errors)
        p3 = got[0]
        self.assertEqual(p3.slot, p1.slot)
        self.assertGreater(p3.fencing_token, max(p1.fencing_token, p2.fencing_token))
        ext = self.client.extend_permit(name, p2.lease, ttl=20)
        self.assertGreater(ext.validity, 10)
        self.assertEqual(ext.fencing_token % 1024, p2.slot)
        for p in (p2, p3):
            self.assertTrue(self.client.release_permit(name, p.lease).released)
        self.assertEqual(self.client.semaphore_status(name).held, 0)
        with self.assertRaises(redlockd.LeaseLost):
            self.client.release_permit(name, p2.lease)

    def test_permits_mismatch_and_invalid_permits(self):
        name = unique("sem-mismatch")
        p = self.client.acquire_permit(name, 2, ttl=10)
        try:
            with self.assertRaises(redlockd.PermitsMismatch) as cm:
                self.client.acquire_permit(name, 3, ttl=10)
            e = cm.exception
            self.assertEqual((e.status, e.code, e.permits), (409, "permits_mismatch", 2))
            self.assertNotIsInstance(e, redlockd.LockHeld)
            with self.assertRaises(redlockd.PermitsMismatch):
                with self.client.semaphore(name, permits=3):
                    self.fail("entered a semaphore with another number of permits")
            for bad in (0, 2000):
                with self.assertRaises(redlockd.InvalidRequest) as cm:
                    self.client.acquire_permit(name, bad)
                self.assertEqual(cm.exception.code, "invalid_permits")
        finally:
            self.client.release_permit(name, p.lease)

    def test_semaphore_held_form_keeps_and_releases_its_permits(self):
        """Two held permits of 2 (ttl 1 s) kept past two ttls (each keep-alive); a third
        is refused; a waiting one gets the permit the first gives back at its block's end;
        every block's end releases."""
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                self._semaphore_held(unique("sem-held-" + keepalive), keepalive)

    def _semaphore_held(self, name, keepalive):
        release_waiter = threading.Event()

        def waiter():
            with self.client.semaphore(name, permits=2, ttl=1, wait=15,
                                       keepalive=keepalive) as w:
                slot, token = w.slot, w.fencing_token
                release_waiter.wait(15)
                return slot, token
        with self.client.semaphore(name, 2, 1, keepalive=keepalive) as a:
            with self.client.semaphore(name, 2, 1, keepalive=keepalive) as b:
                self.assertEqual({a.slot, b.slot}, {0, 1})
                self.assertEqual((a.permits, a.fencing_token % 1024), (2, a.slot))
                self.assertTrue(a.locked())
                until = time.monotonic() + 2.2
                for p in (a, b):
                    self.assertFalse(p.lost.wait(max(0.0, until - time.monotonic())),
                                     p.lost_reason)
                self.assertEqual(self.client.semaphore_status(name).held, 2)
                with self.assertRaises(redlockd.LockHeld):
                    with self.client.semaphore(name, permits=2, ttl=1):
                        self.fail("a third permit of 2")
                t, got, errors = self.parked_waiter(waiter)
            try:
                wait_until(lambda: self.client.semaphore_status(name).held == 2 or errors,
                           10, "the waiter to get b's permit")
                self.assertFalse(errors, errors)
            finally:
                release_waiter.set()
                t.join(15)
        self.assertFalse(errors, errors)
        self.assertEqual(got[0][0], b.slot)
        self.assertGreater(got[0][1], b.fencing_token)
        self.assertEqual(self.client.semaphore_status(name).held, 0)
        with self.assertRaises(KeyError):
            with self.client.semaphore(name, permits=2, ttl=5, keepalive=keepalive):
                raise KeyError("from the body")
        self.assertEqual(self.client.semaphore_status(name).held, 0)


class Elections(Base):
    def test_campaign_resign_observe_proclaim(self):
        name = unique("elect")
        observed = []
        stop = threading.Event()

        def observer():
            for leader in self.client.election(name).observe(wait=5):
                observed.append(leader)
                if stop.is_set() and leader is None:
                    return
        t = threading.Thread(target=observer, daemon=True)
        t.start()
        wait_until(lambda: observed, 10, "the observer's first answer")
        self.assertIsNone(observed[0])
        a = self.client.election(name, value="A", ttl=1)
        b = self.client.election(name, value="B", ttl=1)
        lock = a.campaign(timeout=5)
        self.assertTrue(a.is_leader())
        self.assertEqual(a.fencing_token, lock.fencing_token)
        self.assertEqual(b.leader().owner, "A")
        with self.assertRaises(redlockd.LockHeld):
            b.campaign(timeout=0.3)
        self.assertFalse(b.is_leader())
        self.assertTrue(b.lost.is_set())
        # B campaigns meanwhile; A proclaims, keeps the lead past its ttl, then resigns.
        tb, got, errors = self.in_thread(lambda: b.campaign(timeout=10))
        a.proclaim("A2")
        self.assertEqual(a.leader().owner, "A2")
        self.assertFalse(a.lost.wait(1.5), a.lost_reason)
        self.assertTrue(a.resign())
        tb.join(10)
        self.assertFalse(errors, errors)
        self.assertTrue(b.is_leader())
        self.assertGreater(b.fencing_token, lock.fencing_token)
        stop.set()
        with b:
            pass         # already leading: `with` would campaign again
        self.assertFalse(b.is_leader())
        t.join(10)
        owners = [x.owner if x else None for x in observed]
        self.assertEqual(owners[0], None)
        self.assertIn("A", owners)
        self.assertIn("B", owners)
        self.assertEqual(owners[-1], None)

    def test_leadership_lost_is_signalled(self):
        name = unique("elect-lost")
        called = threading.Event()
        e = self.client.election(name, value="me", ttl=1, on_lost=called.set)
        with e:
            self.client.force_release(name)
            self.assertTrue(e.lost.wait(2))
            self.assertTrue(called.wait(2))
            self.assertFalse(e.is_leader())


if __name__ == "__main__":
    unittest.main()
