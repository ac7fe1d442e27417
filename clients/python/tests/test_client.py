"""test_client.py -- the Python client against the real bin/redlockd and 5 real
redis-server masters (clients/stack.py starts them and sets REDLOCK_URL,
REDLOCK_TEST_TOKEN, REDLOCK_TEST_MASTER_PIDS, REDLOCK_TEST_MASTER_PORTS).

    python3 clients/stack.py -- clients/python/test.sh      (what make test-clients runs)

unittest, standard library only.  Every wait is a condition with a deadline; a test that
freezes masters (SIGSTOP) continues them (SIGCONT) before it ends, also on failure, and
waits until the service has all of them back."""
import json
import os
import re
import signal
import socket
import threading
import time
import unittest
import urllib.request

import redlockd

URL = os.environ.get("REDLOCK_URL", "")
TOKEN = os.environ.get("REDLOCK_TEST_TOKEN", "")
MASTER_PIDS = [int(p) for p in os.environ.get("REDLOCK_TEST_MASTER_PIDS", "").split(",") if p]
OPENAPI = os.environ.get("REDLOCK_OPENAPI") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "api", "openapi.yaml")

_counter = [0]


def unique(base):
    """A lock name no other test (or earlier run against the same masters) uses."""
    _counter[0] += 1
    return "py-client/%s-%d-%d" % (base, os.getpid(), _counter[0])


def wait_until(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def http_json(path):
    req = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(name):
    """The sum of a metric's samples in /metrics (0 when absent)."""
    _, text = http_json("/metrics")
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})? ([0-9.eE+-]+)$" % re.escape(name), line)
        if m:
            total += float(m.group(2))
    return total


def all_masters_ready():
    status, body = http_json("/readyz")
    if status != 200:
        return False
    masters = json.loads(body).get("masters", [])
    return len(masters) == len(MASTER_PIDS) and all(m.get("ok") for m in masters)


class Frozen:
    """SIGSTOP the first n masters; SIGCONT them on exit, whatever happened, and wait
    until the service trusts all of them again."""

    def __init__(self, n):
        self.pids = MASTER_PIDS[:n]

    def __enter__(self):
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        for pid in self.pids:
            os.kill(pid, signal.SIGCONT)
        wait_until(all_masters_ready, 30, "all masters ready again after SIGCONT", 0.05)
        return False


class SwallowingProxy:
    """A TCP proxy to the service that forwards everything, except that on the first
    connection it reads the service's answer and never passes it on: the client sees a
    request that got no answer (and times out) although the service acted on it."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.swallowed = threading.Event()   # the first answer arrived (and was kept)
        self.connections = 0
        self._socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            u = socket.create_connection(self.target)
            self._socks += [c, u]
            swallow = self.connections == 1
            threading.Thread(target=self._pipe, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, swallow), daemon=True).start()

    def _pipe(self, src, dst, swallow):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if swallow:
                    self.swallowed.set()
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            if not swallow:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()
        for s in self._socks:
            s.close()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(URL and TOKEN and len(MASTER_PIDS) == 5,
                        "run under clients/stack.py (REDLOCK_URL etc. unset)")
        self.client = redlockd.Client(URL, token=TOKEN, timeout=10)

    # -- the error table ----------------------------------------------------------------
    def test_error_codes_are_the_documents(self):
        """ERRORS names exactly the codes of api/openapi.yaml's Error schema."""
        with open(OPENAPI) as f:
            text = f.read()
        m = re.search(r"\n    Error:\n(.*?)\n    \S", text, re.S)
        self.assertIsNotNone(m, "no components.schemas.Error in " + OPENAPI)
        enum = re.search(r"\n( +)enum:\n((?:\1  - \S+\n)+)", m.group(1) + "\n")
        self.assertIsNotNone(enum, "no enum in the Error schema")
        codes = re.findall(r"- (\S+)", enum.group(2))
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
        # A code newer than the client is judged by its status.
        e = redlockd.errors.error_from_reply(503, {"error": "brand_new", "message": "m"})
        self.assertIsInstance(e, redlockd.ServiceUnavailable)
        self.assertEqual(e.code, "brand_new")

    # -- the plain calls ------------------------------------------------------------------
    def test_acquire_status_extend_release(self):
        name = unique("plain")
        g = self.client.acquire(name, ttl_ms=10000, owner="py-test pid %d" % os.getpid())
        self.assertEqual(g.name, name)
        self.assertEqual(len(g.lease), 32)
        self.assertGreater(g.validity_ms, 9000)
        self.assertGreater(g.remaining(), 8)
        st = self.client.status(name)
        self.assertTrue(st.held)
        self.assertEqual(st.owner, "py-test pid %d" % os.getpid())
        self.assertEqual(st.fencing_token, g.fencing_token)
        ext = self.client.extend(name, g.lease, ttl_ms=20000)
        self.assertEqual(ext.fencing_token, g.fencing_token)
        self.assertGreater(ext.validity_ms, 19000)
        self.assertGreater(self.client.status(name).validity_ms, 10000)
        self.client.release(name, g.lease)
        self.assertFalse(self.client.status(name).held)
        with self.assertRaises(redlockd.LeaseLost) as cm:
            self.client.release(name, g.lease)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "lease_not_found"))
        with self.assertRaises(redlockd.LeaseLost):
            self.client.extend(name, g.lease)
        g2 = self.client.acquire(name, ttl_ms=1000)
        self.assertGreater(g2.fencing_token, g.fencing_token)
        self.client.release(name, g2.lease)

    def test_lock_held_says_when_to_retry(self):
        name = unique("held")
        g = self.client.acquire(name, ttl_ms=20000)
        try:
            with self.assertRaises(redlockd.LockHeld) as cm:
                self.client.acquire(name, ttl_ms=1000)
            e = cm.exception
            self.assertEqual((e.status, e.code), (409, "lock_held"))
            self.assertTrue(0 < e.retry_after <= 20, e.retry_after)
            with self.assertRaises(redlockd.LockHeld):
                with self.client.lock(name, ttl_ms=1000):
                    self.fail("entered a lock another lease holds")
        finally:
            self.client.release(name, g.lease)

    def test_unauthorized_and_invalid(self):
        for token in (None, "not-the-token-0123456789"):
            c = redlockd.Client(URL, token=token)
            with self.assertRaises(redlockd.Unauthorized) as cm:
                c.acquire(unique("auth"), ttl_ms=1000)
            self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
            self.assertNotIsInstance(cm.exception, redlockd.Forbidden)
        with self.assertRaises(redlockd.InvalidRequest) as cm:
            self.client.acquire(unique("bad"), ttl_ms=0)
        self.assertEqual(cm.exception.code, "invalid_ttl")
        with self.assertRaises(redlockd.InvalidRequest) as cm:
            self.client.acquire("no spaces allowed", ttl_ms=1000)
        self.assertEqual(cm.exception.code, "invalid_name")

    def test_unreachable(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()       # nothing listens there now
        c = redlockd.Client("http://127.0.0.1:%d" % port, token=TOKEN, timeout=2)
        with self.assertRaises(redlockd.Unreachable):
            c.acquire(unique("nowhere"), ttl_ms=1000)

    def test_status_watch(self):
        name = unique("watch")
        st = self.client.status(name)
        self.assertFalse(st.held)
        got = []
        t = threading.Thread(target=lambda: got.append(
            self.client.status(name, index=st.index, wait_ms=20000)))
        t.start()
        # No race with the watch's start: it answers as soon as the index is not st's.
        g = self.client.acquire(name, ttl_ms=5000)
        t.join(15)
        self.assertFalse(t.is_alive(), "the watch did not answer the grant")
        self.assertTrue(got[0].held)
        self.assertNotEqual(got[0].index, st.index)
        self.client.release(name, g.lease)

    # -- idempotent retry -----------------------------------------------------------------
    def test_acquire_without_answer_is_retried_with_the_same_lease(self):
        """The first POST's 201 never reaches the client: it times out and sends the
        POST again with its lease, and gets the grant the first attempt made (not 409)."""
        host, port = URL.split("//")[1].rsplit(":", 1)
        for retries in (1, 0):
            name = unique("retry")
            proxy = SwallowingProxy(host, int(port))
            try:
                c = redlockd.Client("http://127.0.0.1:%d" % proxy.port, token=TOKEN,
                                    timeout=1.5, retries=retries)
                if retries == 0:
                    with self.assertRaises(redlockd.Unreachable):
                        c.acquire(name, ttl_ms=10000)
                    # The grant was made all the same, for a lease nobody knows: this
                    # is what retrying with the same lease is for.
                    self.assertTrue(proxy.swallowed.is_set())
                    self.assertTrue(self.client.status(name).held)
                    continue
                g = c.acquire(name, ttl_ms=10000)
                self.assertTrue(proxy.swallowed.is_set(), "the first answer was not swallowed")
                self.assertEqual(proxy.connections, 2)
                st = self.client.status(name)
                self.assertTrue(st.held)
                self.assertEqual(st.fencing_token, g.fencing_token)
                # And by hand: the same lease again is the same grant.
                again = self.client.acquire(name, ttl_ms=10000, lease=g.lease)
                self.assertEqual(again.fencing_token, g.fencing_token)
                self.client.release(name, g.lease)
            finally:
                proxy.close()

    # -- client.lock() ------------------------------------------------------------------
    def test_lock_is_kept_alive_past_its_ttl(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("keep-" + keepalive)
                with self.client.lock(name, ttl_ms=600, keepalive=keepalive) as lock:
                    self.assertEqual(len(lock.lease), 32)
                    # Hold it for three ttls: lost must stay clear, the lock held.
                    self.assertFalse(lock.lost.wait(1.8), lock.lost_reason)
                    st = self.client.status(name)
                    self.assertTrue(st.held)
                    self.assertEqual(st.fencing_token, lock.fencing_token)
                    self.assertGreater(lock.remaining(), 0)
                    lock.check()
                token = lock.fencing_token
                self.assertFalse(self.client.status(name).held, "not released at exit")
                g = self.client.acquire(name, ttl_ms=1000)
                self.assertGreater(g.fencing_token, token)
                self.client.release(name, g.lease)

    def test_lock_waits_for_the_holder(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("wait-" + keepalive)
                holder = self.client.acquire(name, ttl_ms=30000)
                parked = metric("redlockd_parked_waiters")
                got, errors = [], []

                def waiter():
                    try:
                        with self.client.lock(name, ttl_ms=5000, wait_ms=20000,
                                              owner="waiter", keepalive=keepalive) as lock:
                            got.append((lock.fencing_token, self.client.status(name)))
                    except Exception as e:   # reported below
                        errors.append(e)
                t = threading.Thread(target=waiter)
                t.start()
                wait_until(lambda: metric("redlockd_parked_waiters") > parked or errors,
                           10, "the waiter to be parked")
                self.assertFalse(errors, errors)
                self.client.release(name, holder.lease)
                t.join(15)
                self.assertFalse(t.is_alive())
                self.assertFalse(errors, errors)
                token, st = got[0]
                self.assertGreater(token, holder.fencing_token)
                self.assertEqual((st.held, st.owner, st.fencing_token), (True, "waiter", token))

    def test_lock_wait_runs_out(self):
        name = unique("wait-out")
        holder = self.client.acquire(name, ttl_ms=30000)
        try:
            t0 = time.monotonic()
            with self.assertRaises(redlockd.LockHeld) as cm:
                with self.client.lock(name, ttl_ms=1000, wait_ms=400):
                    self.fail("entered a held lock")
            self.assertGreaterEqual(time.monotonic() - t0, 0.39)
            self.assertGreater(cm.exception.retry_after, 25)
        finally:
            self.client.release(name, holder.lease)

    def test_lock_lost_when_a_majority_of_masters_freezes(self):
        """Three of five masters stopped: the lock cannot be extended; lost is set no
        later than the validity the client counts ends, and leaving the block raises
        LeaseLost."""
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("freeze-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost) as cm:
                    with self.client.lock(name, ttl_ms=2000, keepalive=keepalive) as lock:
                        self.assertFalse(lock.lost.is_set())
                        with Frozen(3):
                            frozen_at = time.monotonic()
                            deadline = lock.deadline
                            self.assertTrue(lock.lost.wait(5), "lost not set in 5 s")
                            lost_at = time.monotonic()
                        # Before the validity known when the masters froze ran out
                        # (lost is said a tenth of the ttl before it).
                        self.assertLess(lost_at, deadline,
                                        "lost %.3fs after the deadline" % (lost_at - deadline))
                        self.assertGreater(lost_at - frozen_at, 0.1)
                        self.assertRaises(redlockd.LeaseLost, lock.check)
                self.assertIn(name, str(cm.exception))
                self.assertIsNotNone(lock.lost_reason)
                # The service is whole again: the lock can be taken anew.
                g = wait_until(lambda: self._try_acquire(name), 10, "a new grant")
                self.assertGreater(g.fencing_token, lock.fencing_token)
                self.client.release(name, g.lease)

    def _try_acquire(self, name):
        try:
            return self.client.acquire(name, ttl_ms=2000)
        except (redlockd.LockHeld, redlockd.ServiceUnavailable):
            return None

    def test_lock_lost_when_someone_else_releases_it(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("stolen-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost):
                    with self.client.lock(name, ttl_ms=900, keepalive=keepalive) as lock:
                        self.client.release(name, lock.lease)     # from "elsewhere"
                        self.assertTrue(lock.lost.wait(3), "lost not set")
                self.assertFalse(self.client.status(name).held)

    def test_body_exception_wins_and_lock_is_released(self):
        name = unique("raise")
        with self.assertRaises(KeyError):
            with self.client.lock(name, ttl_ms=5000):
                raise KeyError("from the body")
        self.assertFalse(self.client.status(name).held)

    def test_lock_with_a_chosen_lease_and_owner(self):
        name = unique("chosen")
        lease = redlockd.new_lease()
        with self.client.lock(name, ttl_ms=3000, lease=lease, owner="me") as lock:
            self.assertEqual(lock.lease, lease)
            self.assertEqual(self.client.status(name).owner, "me")
            # A retry of the same acquire (same lease) is the same grant.
            self.assertEqual(self.client.acquire(name, ttl_ms=3000, lease=lease).fencing_token,
                             lock.fencing_token)

    # -- shared locks -------------------------------------------------------------------
    def test_readers_hold_at_once_and_keep_a_writer_out(self):
        """Four readers (ttl 600 ms) hold the name at once for more than two ttls; a
        writer is refused with 409 lock_held meanwhile, and granted, with a larger
        token, once they have left.  Both keep-alives (each its own round of readers)."""
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                self._readers(unique("readers-" + keepalive), 4, keepalive)

    def _readers(self, name, n, keepalive):
        held, errors = [], []
        done = threading.Event()

        def reader():
            try:
                with self.client.lock(name, ttl_ms=600, shared=True,
                                      keepalive=keepalive) as r:
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
            until = time.monotonic() + 1.3
            for r in held:
                self.assertFalse(r.lost.wait(max(0.0, until - time.monotonic())),
                                 r.lost_reason)
                self.assertTrue(r.shared and r.grant.shared)
            st = self.client.status(name)
            self.assertEqual((st.held, st.readers), (False, n))
            self.assertEqual({r.fencing_token for r in held}, {st.fencing_token})
            with self.assertRaises(redlockd.LockHeld) as cm:
                self.client.acquire(name, ttl_ms=1000)
            self.assertEqual((cm.exception.status, cm.exception.code), (409, "lock_held"))
        finally:
            done.set()
            for t in threads:
                t.join(15)
        self.assertFalse(errors, errors)
        self.assertEqual(self.client.status(name).readers, 0, "readers not released at exit")
        g = self.client.acquire(name, ttl_ms=1000)
        self.assertGreater(g.fencing_token, held[0].fencing_token)
        self.client.release(name, g.lease)

    def test_shared_plain_calls_and_a_waiting_writer(self):
        """acquire(shared=True) twice; extend and release a reader's lease as any; a
        writer that waits is granted when the last reader leaves."""
        name = unique("shared-plain")
        r1 = self.client.acquire(name, ttl_ms=10000, shared=True)
        r2 = self.client.acquire(name, ttl_ms=10000, shared=True)
        self.assertTrue(r1.shared and r2.shared)
        self.assertNotEqual(r1.lease, r2.lease)
        self.assertGreater(self.client.extend(name, r1.lease, ttl_ms=20000).validity_ms, 10000)
        self.assertEqual(self.client.status(name).readers, 2)
        parked = metric("redlockd_parked_waiters")
        got, errors = [], []

        def writer():
            try:
                got.append(self.client.acquire(name, ttl_ms=5000, wait_ms=15000))
            except Exception as e:   # reported below
                errors.append(e)
        t = threading.Thread(target=writer)
        t.start()
        wait_until(lambda: metric("redlockd_parked_waiters") > parked or errors, 10,
                   "the writer to be parked")
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

    # -- semaphores ---------------------------------------------------------------------
    def test_semaphore_of_two_refuses_a_third_and_hands_a_permit_to_a_waiter(self):
        name = unique("sem")
        p1 = self.client.acquire_permit(name, 2, ttl_ms=10000)
        p2 = self.client.acquire_permit(name, 2, ttl_ms=10000)
        self.assertEqual({p1.slot, p2.slot}, {0, 1})
        self.assertEqual((p1.permits, p2.permits), (2, 2))
        for p in (p1, p2):
            self.assertEqual(p.fencing_token % 1024, p.slot)
        self.assertNotEqual(p1.fencing_token, p2.fencing_token)
        with self.assertRaises(redlockd.LockHeld) as cm:
            self.client.acquire_permit(name, 2, ttl_ms=10000)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "lock_held"))
        self.assertGreater(cm.exception.retry_after, 5)
        self.assertEqual(self.client.semaphore_status(name),
                         redlockd.SemaphoreStatus(name=name, permits=2, held=2, free=0))
        parked = metric("redlockd_parked_waiters")
        got, errors = [], []

        def waiter():
            try:
                got.append(self.client.acquire_permit(name, 2, ttl_ms=10000, wait_ms=15000))
            except Exception as e:   # reported below
                errors.append(e)
        t = threading.Thread(target=waiter)
        t.start()
        wait_until(lambda: metric("redlockd_parked_waiters") > parked or errors, 10,
                   "the waiter to be parked")
        self.assertFalse(got or errors, "the waiter did not wait: %r" % (got or errors))
        self.client.release_permit(name, p1.lease)
        t.join(15)
        self.assertFalse(errors, errors)
        p3 = got[0]
        self.assertEqual(p3.slot, p1.slot)
        self.assertGreater(p3.fencing_token, max(p1.fencing_token, p2.fencing_token))
        ext = self.client.extend_permit(name, p2.lease, ttl_ms=20000)
        self.assertGreater(ext.validity_ms, 10000)
        self.assertEqual(ext.fencing_token % 1024, p2.slot)
        for p in (p2, p3):
            self.client.release_permit(name, p.lease)
        self.assertEqual(self.client.semaphore_status(name).held, 0)
        with self.assertRaises(redlockd.LeaseLost):
            self.client.release_permit(name, p2.lease)

    def test_permits_mismatch_and_invalid_permits(self):
        name = unique("sem-mismatch")
        p = self.client.acquire_permit(name, 2, ttl_ms=10000)
        try:
            with self.assertRaises(redlockd.PermitsMismatch) as cm:
                self.client.acquire_permit(name, 3, ttl_ms=10000)
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
        """Two held permits of 2 (ttl 600 ms) kept past two ttls; a third held form is
        refused; a waiting one gets the permit the first gives back at its block's end;
        every block's end releases."""
        name = unique("sem-held")
        got, errors = [], []
        release_waiter = threading.Event()

        def waiter():
            try:
                with self.client.semaphore(name, permits=2, ttl_ms=600, wait_ms=15000) as w:
                    got.append((w.slot, w.fencing_token))
                    release_waiter.wait(15)
            except Exception as e:   # reported below
                errors.append(e)
        with self.client.semaphore(name, permits=2, ttl_ms=600) as a:
            with self.client.semaphore(name, permits=2, ttl_ms=600) as b:
                self.assertEqual({a.slot, b.slot}, {0, 1})
                self.assertEqual((a.permits, a.fencing_token % 1024), (2, a.slot))
                until = time.monotonic() + 1.3
                for p in (a, b):
                    self.assertFalse(p.lost.wait(max(0.0, until - time.monotonic())),
                                     p.lost_reason)
                self.assertEqual(self.client.semaphore_status(name).held, 2)
                with self.assertRaises(redlockd.LockHeld):
                    with self.client.semaphore(name, permits=2, ttl_ms=600):
                        self.fail("a third permit of 2")
                parked = metric("redlockd_parked_waiters")
                t = threading.Thread(target=waiter)
                t.start()
                wait_until(lambda: metric("redlockd_parked_waiters") > parked or errors,
                           10, "the waiter to be parked")
            try:
                wait_until(lambda: got or errors, 10, "the waiter to get b's permit")
                self.assertFalse(errors, errors)
                self.assertEqual(got[0][0], b.slot)
                self.assertGreater(got[0][1], b.fencing_token)
                self.assertEqual(self.client.semaphore_status(name).held, 2)
            finally:
                release_waiter.set()
                t.join(15)
        self.assertFalse(errors, errors)
        self.assertEqual(self.client.semaphore_status(name).held, 0)
        with self.assertRaises(KeyError):
            with self.client.semaphore(name, permits=2, ttl_ms=5000):
                raise KeyError("from the body")
        self.assertEqual(self.client.semaphore_status(name).held, 0)


if __name__ == "__main__":
    unittest.main()
