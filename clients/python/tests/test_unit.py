"""test_unit.py -- the parts that need no service: whole-call deadlines against a local
server that trickles its answer (and a name lookup that hangs), HTTP framing, durations,
the belief and its timer, the duplex session's rules, the package's import graph."""
import ast
import asyncio
import datetime
import os
import socket
import threading
import time
import unittest

import redlockd
import redlockd.aio as aio
from redlockd import _belief, _duplex, _proto


class TricklingServer:
    """A TCP server on a free loopback port that reads a request and answers with a
    valid HTTP answer, one byte every `step` seconds (a per-read timeout never fires)."""

    ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 97\r\n"
              b"\r\n" + b'{"name":"x","held":false,"owner":null,"validity_ms":0,'
              b'"fencing_token":0,"index":"0"}'.ljust(97))

    def __init__(self, step):
        self.step = step
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._answer, args=(c,), daemon=True).start()

    def _answer(self, c):
        try:
            c.recv(65536)
            for i in range(len(self.ANSWER)):
                c.sendall(self.ANSWER[i:i + 1])
                time.sleep(self.step)
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


class WholeCallDeadlines(unittest.TestCase):
    def test_a_trickled_answer_cannot_stretch_a_call(self):
        """~190 bytes at 50 ms each would take ~9.5 s; the call's deadline is 0.5 s."""
        srv = TricklingServer(0.05)
        self.addCleanup(srv.close)
        c = redlockd.Client("http://127.0.0.1:%d" % srv.port, timeout=0.5, retries=0)
        self.addCleanup(c.close)
        t = time.monotonic()
        with self.assertRaises(redlockd.Unreachable):
            c.status("x")
        self.assertLess(time.monotonic() - t, 2.0)     # not 9.5 s (room for a busy machine)
        # The same with a fast trickle: the answer comes within the deadline, read whole.
        fast = TricklingServer(0.0005)
        self.addCleanup(fast.close)
        c2 = redlockd.Client("http://127.0.0.1:%d" % fast.port, timeout=5)
        self.addCleanup(c2.close)
        self.assertEqual(c2.status("x").index, "0")

    def test_asyncio_a_trickled_answer_cannot_stretch_a_call(self):
        srv = TricklingServer(0.05)
        self.addCleanup(srv.close)

        async def main():
            c = aio.AsyncClient("http://127.0.0.1:%d" % srv.port, timeout=0.5, retries=0)
            t = time.monotonic()
            with self.assertRaises(redlockd.Unreachable):
                await c.status("x")
            await c.close()
            return time.monotonic() - t
        self.assertLess(asyncio.run(main()), 2.0)

    def test_a_name_lookup_that_hangs_cannot_stretch_a_call(self):
        real = socket.getaddrinfo
        release = threading.Event()

        def slow(host, *a, **kw):
            if host == "slow.example":
                release.wait(10)
                raise socket.gaierror("no such name")
            return real(host, *a, **kw)
        socket.getaddrinfo = slow
        try:
            c = redlockd.Client("http://slow.example:1", timeout=0.3, retries=0)
            t = time.monotonic()
            with self.assertRaises(redlockd.Unreachable):
                c.status("x")
            self.assertLess(time.monotonic() - t, 2.0)     # not 10 s
        finally:
            release.set()
            socket.getaddrinfo = real


class OneShotServer:
    """Answers each request with `answer` and closes the connection."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.recv(65536)
                for i in range(0, len(self.answer), 7):     # in small pieces
                    c.sendall(self.answer[i:i + 7])
                    time.sleep(0.001)

    def close(self):
        self.sock.close()


class Bodies(unittest.TestCase):
    """Both clients read a chunked body and one delimited by the connection's end."""
    DOC = b'{"name":"x","held":false,"owner":null,"validity_ms":0,"fencing_token":0,"index":"7"}'

    def answers(self):
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p)
                           for p in (self.DOC[:10], self.DOC[10:50], self.DOC[50:])) + b"0\r\n\r\n"
        yield b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
        yield b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + self.DOC

    def test_blocking_and_asyncio(self):
        for answer in self.answers():
            srv = OneShotServer(answer)
            self.addCleanup(srv.close)
            url = "http://127.0.0.1:%d" % srv.port
            with redlockd.Client(url, timeout=5) as c:
                self.assertEqual(c.status("x").index, "7")

            async def main():
                async with aio.AsyncClient(url, timeout=5) as c:
                    return (await c.status("x")).index
            self.assertEqual(asyncio.run(main()), "7")


class Framing(unittest.TestCase):
    def test_head_and_bodies(self):
        h = _proto.parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nx-a: 2")
        self.assertEqual((h.status, h.header("x-a"), _proto.framing(h, "GET")),
                         (200, "1, 2", ("length", 2)))
        self.assertTrue(_proto.reusable(h, "length"))
        h = _proto.parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked")
        self.assertEqual(_proto.framing(h, "GET"), ("chunked", 0))
        h = _proto.parse_head(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0")
        self.assertFalse(_proto.reusable(h, "length"))
        h = _proto.parse_head(b"HTTP/1.0 200 OK")
        self.assertEqual(_proto.framing(h, "GET"), ("close", 0))
        h = _proto.parse_head(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: redlock-hold")
        self.assertEqual(_proto.framing(h, "POST"), ("none", 0))
        for bad in (b"SSH-2.0-x", b"HTTP/1.1 2000 OK", b"HTTP/1.1 200 OK\r\nno colon"):
            with self.assertRaises(redlockd.ProtocolError):
                _proto.parse_head(bad)
        self.assertEqual(_proto.parse_chunk_size(b"1a;ext=1"), 26)

    def test_requests(self):
        ep = _proto.Endpoint.parse("https://[::1]:8443/base/")
        self.assertEqual((ep.host, ep.port, ep.base, ep.host_header, ep.literal),
                         ("::1", 8443, "/base", "[::1]:8443", True))
        call = _proto.acquire("a/b c", 1.5, datetime.timedelta(milliseconds=250),
                              "L" * 20, shared=True)
        self.assertEqual(call.target(ep.base), "/base/locks/a%2Fb%20c")
        self.assertEqual(call.body, {"lease": "L" * 20, "ttl_ms": 1500, "wait_ms": 250,
                                     "mode": "shared"})
        self.assertEqual(call.wait, 0.25)
        raw = _proto.request_bytes(ep, "tok", "POST", "/x", b"{}", upgrade=True)
        self.assertIn(b"Authorization: Bearer tok\r\n", raw)
        self.assertIn(b"Upgrade: redlock-hold\r\n", raw)
        self.assertTrue(raw.endswith(b"Content-Length: 2\r\n\r\n{}"))
        with self.assertRaises(ValueError):
            redlockd.Client(token="a\r\nX-Evil: 1")

    def test_durations(self):
        self.assertEqual(_proto.to_ms(1.2345, "ttl"), 1234)
        self.assertEqual(_proto.to_ms(datetime.timedelta(seconds=2), "ttl"), 2000)
        self.assertIsNone(_proto.to_ms(None, "ttl"))
        for bad, exc in ((-1, ValueError), (True, TypeError), ("1", TypeError),
                         (float("nan"), TypeError), (float("inf"), ValueError)):
            with self.assertRaises(exc):
                _proto.to_ms(bad, "ttl")
        self.assertEqual(redlockd.loss_margin(3.0), 0.3)
        self.assertEqual(redlockd.loss_margin(0.05), 0.01)
        self.assertEqual(redlockd.loss_margin(3600), 1.0)


class Beliefs(unittest.TestCase):
    def test_core(self):
        b = _belief.BeliefCore(10.0, 1.0)
        self.assertEqual(b.lose_at, 9.0)
        self.assertTrue(b.extend_to(12.0))
        self.assertTrue(b.extend_to(11.0))        # an older answer never shortens it
        self.assertEqual(b.deadline, 12.0)
        self.assertFalse(b.due(10.9))
        self.assertTrue(b.due(11.0))
        self.assertTrue(b.lose("x"))
        self.assertFalse(b.lose("y"))             # lost once, for good
        self.assertFalse(b.extend_to(20.0))       # a later answer brings nothing back
        self.assertEqual((b.reason, b.deadline), ("x", 12.0))
        p = _belief.BeliefCore(0.0, 0.1, pending=True)
        self.assertFalse(p.due(5.0))

    def test_timer_sets_lost_without_any_read(self):
        ev = threading.Event()
        called = threading.Event()
        t = time.monotonic()
        b = _belief.Belief(t + 0.6, 0.3, ev, on_lost=called.set)
        self.assertTrue(ev.wait(2))
        self.assertGreaterEqual(b.core.lost_at, t + 0.3)
        self.assertLess(b.core.lost_at, t + 0.6)     # the margin absorbs a busy machine
        self.assertTrue(called.wait(2))
        # Extended in time: not lost.
        ev2 = threading.Event()
        b2 = _belief.Belief(time.monotonic() + 0.2, 0.05, ev2)
        b2.extend_to(time.monotonic() + 0.6)
        self.assertFalse(ev2.wait(0.3))
        self.assertTrue(ev2.wait(1))
        # Ended by its holder: never lost.
        ev3 = threading.Event()
        b3 = _belief.Belief(time.monotonic() + 0.1, 0.05, ev3)
        self.assertTrue(b3.end())
        self.assertFalse(ev3.wait(0.3))


class FakeBelief:
    def __init__(self, deadline):
        self.core = _belief.BeliefCore(deadline, 0.1)

    def extend_to(self, d):
        return self.core.extend_to(d)

    def lose(self, reason, lease_gone=False):
        return self.core.lose(reason, lease_gone)

    def check_now(self):
        if self.core.due(time.monotonic()):
            self.core.lose("timer")


class Duplex(unittest.TestCase):
    def session(self, deadline=100.0):
        self.release = False
        self.answers = 0
        b = FakeBelief(deadline)

        def answered():
            self.answers += 1
        return b, _duplex.DuplexSession(b, 0.5, 5.0, lambda: self.release, answered)

    def test_one_ping_in_flight_and_validity_from_its_send(self):
        b, s = self.session()
        self.assertEqual(s.step(1.0), ("send", b'{"ping":1}\n', 6.0))
        self.assertEqual(s.step(1.1)[0], "read")          # never a second ping in flight
        self.assertEqual(s.step(9.0)[0], "read")
        s.line(b'{"event":"alive","ping":1,"validity_ms":200000}', 3.0)
        self.assertEqual(b.core.deadline, 1.0 + 200.0)    # from ping 1's send, not 3.0
        self.assertEqual(self.answers, 1)
        self.assertEqual(s.step(3.0), ("send", b'{"ping":2}\n', 8.0))   # max(1.5, 3.0)
        s.line(b'{"event":"alive","ping":2,"validity_ms":1000}', 3.1)
        self.assertEqual(b.core.deadline, 201.0)          # the latest end stays
        self.assertEqual(s.step(3.2), ("read", b"", 3.5))  # the next at send + interval

    def test_answer_to_a_ping_not_in_flight_is_a_loss(self):
        b, s = self.session()
        s.step(1.0)
        s.line(b'{"event":"alive","ping":7,"validity_ms":1000}', 1.1)
        self.assertTrue(b.core.is_lost)
        self.assertEqual(s.step(1.2)[1], _proto.RELEASE_LINE)   # let it go at once

    def test_endings(self):
        b, s = self.session()
        s.step(1.0)
        s.line(b'{"event":"released"}', 1.1)
        self.assertTrue(b.core.is_lost and b.core.lease_gone)
        self.assertEqual(s.step(1.2)[0], "stop")          # nothing to release
        b, s = self.session()
        s.step(1.0)
        s.line(b'{"event":"lost","reason":"no_quorum"}', 1.1)
        self.assertTrue(b.core.is_lost and not b.core.lease_gone)
        self.assertEqual(s.step(1.2)[1], _proto.RELEASE_LINE)   # the service waits for it
        b, s = self.session()
        s.step(1.0)
        s.line(b"not json", 1.1)
        self.assertIn("unexpected", b.core.reason)
        b, s = self.session()
        s.end("the stream ended")
        self.assertEqual(b.core.reason, "the stream ended")

    def test_release(self):
        b, s = self.session()
        s.step(1.0)
        self.release = True
        self.assertEqual(s.step(1.1), ("send", _proto.RELEASE_LINE, 6.1))
        self.assertEqual(s.let_go_at, 1.1)
        s.line(b'{"event":"alive","ping":1,"validity_ms":1000}', 1.2)   # still fine
        s.line(b'{"event":"released","reason":"requested"}', 1.3)
        self.assertTrue(s.release_confirmed)
        self.assertFalse(b.core.is_lost)
        self.assertEqual(s.step(1.4)[0], "stop")
        s.end("the stream ended")
        self.assertFalse(b.core.is_lost)                  # a release is no loss


class Package(unittest.TestCase):
    def test_no_import_circle(self):
        """Each module of the package imports only modules below it (no circle, also
        none for type checkers: no TYPE_CHECKING imports)."""
        pkg = os.path.dirname(redlockd.__file__)
        graph = {}
        for f in os.listdir(pkg):
            if not f.endswith(".py"):
                continue
            mod = f[:-3]
            with open(os.path.join(pkg, f)) as fh:
                tree = ast.parse(fh.read())
            deps = set()
            for n in ast.walk(tree):
                if isinstance(n, ast.ImportFrom) and n.level == 1:
                    deps |= {n.module} if n.module else {a.name for a in n.names}
            graph[mod] = deps - {mod}
        seen, stack = set(), []

        def visit(m):
            if m in stack:
                self.fail("import circle: " + " -> ".join(stack[stack.index(m):] + [m]))
            if m in seen or m not in graph:
                return
            stack.append(m)
            for d in graph[m]:
                visit(d)
            stack.pop()
            seen.add(m)
        for m in graph:
            visit(m)
        self.assertNotIn("client", graph["lock"])
        self.assertNotIn("client", graph["election"])

    def test_version_in_one_place(self):
        from redlockd import _version
        self.assertEqual(redlockd.__version__, _version.__version__)
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproject.toml")
        with open(here) as fh:
            text = fh.read()
        self.assertNotRegex(text, r'(?m)^version\s*=\s*"')   # no literal version
        self.assertIn('dynamic = ["version"]', text)


if __name__ == "__main__":
    unittest.main()
