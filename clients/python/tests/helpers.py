"""helpers.py -- what the suites share: the stack clients/stack.py started (its
environment), unique names, waits with deadlines, frozen masters and instances, the
fault relay's control, a TCP proxy that swallows an answer.

Every wait is a condition with a deadline; whatever is frozen (SIGSTOP) is continued
(SIGCONT) when its `with` block ends, also on failure, and the service is waited for."""
import json
import os
import re
import signal
import socket
import threading
import time
import unittest
import urllib.error
import urllib.request

import redlockd

URL = os.environ.get("REDLOCK_URL", "")
URL_B = os.environ.get("REDLOCK_URL_B", "")
RELAY_URL = os.environ.get("REDLOCK_TEST_RELAY_URL", "")
RELAY_CONTROL = os.environ.get("REDLOCK_TEST_RELAY_CONTROL", "")
TOKEN = os.environ.get("REDLOCK_TEST_TOKEN", "")
MASTER_PIDS = [int(p) for p in os.environ.get("REDLOCK_TEST_MASTER_PIDS", "").split(",") if p]
MASTER_PORTS = [int(p) for p in os.environ.get("REDLOCK_TEST_MASTER_PORTS", "").split(",") if p]
SERVICE_PIDS = [int(p) for p in os.environ.get("REDLOCK_TEST_SERVICE_PIDS", "").split(",") if p]
OPENAPI = os.environ.get("REDLOCK_OPENAPI") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "api", "openapi.yaml")
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

_counter = [0]


def require_stack(test: unittest.TestCase) -> None:
    test.assertTrue(URL and TOKEN and len(MASTER_PIDS) == 5,
                    "run under clients/stack.py (REDLOCK_URL etc. unset)")


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


def http_json(path, url=None):
    req = urllib.request.Request((url or URL) + path,
                                 headers={"Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)


def metric(name, url=None):
    """The sum of a metric's samples in /metrics (0 when absent)."""
    _, text = http_json("/metrics", url)
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})? ([0-9.eE+-]+)$" % re.escape(name), line)
        if m:
            total += float(m.group(2))
    return total


def ready(url):
    status, body = http_json("/readyz", url)
    if status != 200:
        return False
    masters = json.loads(body).get("masters", [])
    return len(masters) == len(MASTER_PIDS) and all(m.get("ok") for m in masters)


def all_masters_ready():
    return all(ready(u) for u in (URL, URL_B) if u)


class Frozen:
    """SIGSTOP the first n masters; SIGCONT them on exit, whatever happened, and wait
    until both instances trust all of them again."""

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


class StoppedInstance:
    """SIGSTOP a service instance (0: A, the relayed one; 1: B) -- a VM pause -- and
    SIGCONT it on exit, whatever happened, waiting until it answers again."""

    def __init__(self, which=0):
        self.pid = SERVICE_PIDS[which]
        self.url = (URL, URL_B)[which]
        self.stopped = False

    def stop(self):
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped = True
        return time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.stopped:
            os.kill(self.pid, signal.SIGCONT)
            wait_until(lambda: ready(self.url), 30, "instance %s to answer again" % self.url,
                       0.05)
        return False


class Relay:
    """The fault relay's control (clients/stack.py, class Relay)."""

    def __init__(self):
        host, port = RELAY_CONTROL.rsplit(":", 1)
        self.addr = (host, int(port))

    def command(self, line):
        with socket.create_connection(self.addr, timeout=5) as s:
            s.sendall(line.encode() + b"\n")
            f = s.makefile("rb")
            answer = f.readline().decode().strip()
        if answer != "ok":
            raise AssertionError("relay %r: %s" % (line, answer))

    def __enter__(self):
        self.command("reset")
        return self

    def __exit__(self, *exc):
        self.command("reset")
        return False


class Poller:
    """A second client polling an instance for the lock `name` (a plain acquire every
    10 ms) in a thread; granted_send and granted_recv bound the grant: the
    time.monotonic() just before it sent the request that was granted, and just after
    its answer came; grant is the Grant."""

    def __init__(self, url, name, ttl=5.0):
        self.client = redlockd.Client(url, token=TOKEN, timeout=5)
        self.name = name
        self.ttl = ttl
        self.granted_send = None
        self.granted_recv = None
        self.grant = None
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                g = self.client.acquire(self.name, ttl=self.ttl)
            except (redlockd.LockHeld, redlockd.ServiceUnavailable, redlockd.Unreachable):
                self._stop.wait(0.01)
                continue
            except Exception as e:   # reported by the test
                self.error = e
                return
            self.granted_send, self.granted_recv, self.grant = t, time.monotonic(), g
            return

    def join(self, timeout):
        self._thread.join(timeout)
        return self.grant is not None

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        if self.grant is not None:
            try:
                self.client.release(self.name, self.grant.lease)
            except redlockd.RedlockError:
                pass
        self.client.close()


class LossClock:
    """Records when a held lock's `lost` was set: a thread blocked on the Event takes the
    time as soon as it wakes (a bound later than the signal, never earlier)."""

    def __init__(self, event):
        self.at = None
        self._thread = threading.Thread(target=self._run, args=(event,), daemon=True)
        self._thread.start()

    def _run(self, event):
        event.wait(120)
        if event.is_set():
            self.at = time.monotonic()


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


def host_port(url):
    host, port = url.split("//")[1].rsplit(":", 1)
    return host, int(port)
