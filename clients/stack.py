#!/usr/bin/env python3
"""stack.py -- a throwaway redlockd stack for the client libraries' tests: five real
redis-server masters and the real bin/redlockd, all on free loopback ports, then a command.

    python3 clients/stack.py [--redlockd PATH] [--keep] -- CMD ARGS...

Starts the masters (no persistence, data in a temporary directory), starts redlockd with
`--listen 127.0.0.1:PORT` and a tokens file holding one admin token, waits until /readyz
answers 200, runs CMD with

    REDLOCK_URL=http://127.0.0.1:PORT
    REDLOCK_TEST_TOKEN=client-test-token-0123456789abcdef
    REDLOCK_TEST_MASTER_PIDS=pid1,...,pid5     (the redis-server PIDs, in order)
    REDLOCK_TEST_MASTER_PORTS=port1,...,port5

    REDLOCK_URL_B=http://127.0.0.1:PORT2            (a second instance on the same masters)
    REDLOCK_TEST_SERVICE_PIDS=pidA,pidB             (the instances: a test may SIGSTOP one)
    REDLOCK_TEST_RELAY_URL=http://127.0.0.1:PORT3   (a fault relay in front of the first)
    REDLOCK_TEST_RELAY_CONTROL=127.0.0.1:PORT4      (its control: see Relay)

stops everything it started (by PID; a master or instance left frozen by SIGSTOP is
continued first) and exits with CMD's status (128+N if CMD died of signal N).  The service is
$REDLOCKD_BIN, else ./bin/redlockd of the directory it is run in, else the bin/redlockd
next to this script.  With REDLOCK_TEST_GRACEFUL=1 (what the sanitizer builds set) the
service is stopped with SIGTERM and a non-zero exit status of its own fails the run.
Every wait is a condition with a deadline.  Standard library only."""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

N_MASTERS = 5
TOKEN = "client-test-token-0123456789abcdef"
TOKEN_LINE = TOKEN + " +admin name=clients\n"
HERE = os.path.dirname(os.path.abspath(__file__))


class StackError(Exception):
    pass


def log(msg):
    print("stack: " + msg, file=sys.stderr, flush=True)


def wait_until(pred, timeout, what, interval=0.02):
    """Poll pred() until it returns a true value; StackError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise StackError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_ping(port):
    """True when a Redis server answers PING on 127.0.0.1:port (RESP by hand, no
    redis-cli process per poll)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return 0


def tail(path, n=4000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def find_redlockd(arg):
    for p in (arg, os.environ.get("REDLOCKD_BIN"), os.path.join("bin", "redlockd"),
              os.path.join(HERE, "..", "bin", "redlockd")):
        if p and os.access(p, os.X_OK):
            return os.path.abspath(p)
    raise StackError("no bin/redlockd: run `make` first (or set REDLOCKD_BIN)")


class Relay:
    """A TCP relay to 127.0.0.1:upstream on a free loopback port, run by threads of this
    process, for tests of what a client believes when the network misbehaves.  Its
    control port takes one command a line and answers "ok" (or "error ..."):

        delay up MS       hold every chunk from the client MS ms before passing it on
        delay down MS     the same from the service to the client
        trickle down MS   pass the service's bytes to the client one at a time, MS ms
                          apart (0: off); "trickle up MS" the other way
        cut               close every connection now, both sides (later ones are relayed)
        reset             no delay, no trickle

    Order within a direction is kept; a connection closed on one side is closed on the
    other once its queued bytes have gone."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.delay = {"up": 0.0, "down": 0.0}
        self.trickle = {"up": 0.0, "down": 0.0}
        self.lock = threading.Lock()
        self.conns = set()
        self.listener = self._listen()
        self.control = self._listen()
        self.port = self.listener.getsockname()[1]
        self.control_port = self.control.getsockname()[1]
        for target in (self._accept, self._serve_control):
            threading.Thread(target=target, daemon=True).start()

    @staticmethod
    def _listen():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(128)
        return s

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self.lock:
                self.conns.add(pair)
            for src, dst, way in ((client, server, "up"), (server, client, "down")):
                threading.Thread(target=self._pump, args=(src, dst, way, pair), daemon=True).start()

    def _pump(self, src, dst, way, pair):
        """Read from src, pass on to dst after the direction's delay (a writer thread
        keeps order), byte by byte while it trickles."""
        queue, cond, done = [], threading.Condition(), [False]

        def writer():
            while True:
                with cond:
                    while not queue and not done[0]:
                        cond.wait()
                    if not queue:
                        break
                    due, data = queue.pop(0)
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                try:
                    step = self.trickle[way]
                    if step > 0:
                        for i in range(len(data)):
                            dst.sendall(data[i:i + 1])
                            time.sleep(step)
                            step = self.trickle[way]
                            if step <= 0:
                                dst.sendall(data[i + 1:])
                                break
                    else:
                        dst.sendall(data)
                except OSError:
                    break
            self._close(pair)

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            with cond:
                if not data:
                    done[0] = True
                    cond.notify()
                    break
                queue.append((time.monotonic() + self.delay[way], data))
                cond.notify()

    def _close(self, pair):
        with self.lock:
            self.conns.discard(pair)
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _serve_control(self):
        while True:
            try:
                c, _ = self.control.accept()
            except OSError:
                return
            threading.Thread(target=self._control_conn, args=(c,), daemon=True).start()

    def _control_conn(self, c):
        with c, c.makefile("rwb", buffering=0) as f:
            for line in f:
                words = line.decode(errors="replace").split()
                answer = b"ok\n"
                try:
                    if words[:1] == ["delay"] and words[1] in self.delay:
                        self.delay[words[1]] = float(words[2]) / 1000.0
                    elif words[:1] == ["trickle"] and words[1] in self.trickle:
                        self.trickle[words[1]] = float(words[2]) / 1000.0
                    elif words == ["cut"]:
                        with self.lock:
                            pairs = list(self.conns)
                        for pair in pairs:
                            self._close(pair)
                    elif words == ["reset"]:
                        for d in (self.delay, self.trickle):
                            d["up"] = d["down"] = 0.0
                    else:
                        answer = b"error unknown command\n"
                except (IndexError, ValueError):
                    answer = b"error bad arguments\n"
                f.write(answer)

    def stop(self):
        for s in (self.listener, self.control):
            try:
                s.close()
            except OSError:
                pass
        with self.lock:
            pairs = list(self.conns)
        for pair in pairs:
            self._close(pair)


class Stack:
    def __init__(self, redlockd, keep):
        self.redlockd = redlockd
        self.keep = keep
        self.tmp = tempfile.mkdtemp(prefix="redlock-clients.")
        self.masters = []      # (Popen, port), in order
        self.service = None    # Popen
        self.service_log = os.path.join(self.tmp, "redlockd.log")
        self.url = None
        self.second = None     # Popen: a second instance
        self.url_b = None
        self.relay = None

    def start_masters(self):
        for i in range(N_MASTERS):
            d = os.path.join(self.tmp, "redis%d" % i)
            os.makedirs(d)
            for _ in range(5):     # a free port can be taken before redis binds it
                port = free_port()
                p = subprocess.Popen(
                    ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--dir", d,
                     "--maxmemory-policy", "noeviction", "--protected-mode", "no",
                     "--daemonize", "no", "--logfile", os.path.join(d, "redis.log")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_until(lambda: p.poll() is not None or redis_ping(port), 10,
                               "redis-server on port %d" % port)
                except StackError:
                    p.kill()
                    p.wait()
                    raise
                if p.poll() is None:
                    self.masters.append((p, port))
                    break
                p.wait()
            else:
                raise StackError("could not start redis-server %d: %s" % (
                    i, tail(os.path.join(d, "redis.log"), 1000)))

    def start_service(self):
        """The first instance, then a second one on the same masters, then the relay in
        front of the first."""
        tokens = os.path.join(self.tmp, "tokens")
        fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(TOKEN_LINE)
        self.service, self.url = self._start_instance(tokens)
        self.second, self.url_b = self._start_instance(tokens)
        self.relay = Relay(int(self.url.rsplit(":", 1)[1]))

    def _start_instance(self, tokens):
        masters = ",".join("127.0.0.1:%d" % port for _, port in self.masters)
        for _ in range(5):
            port = free_port()
            url = "http://127.0.0.1:%d" % port
            # 250 ms per master (as tests/cli and the integration suites use): on a busy
            # 2-core machine a 50 ms round can miss a master that is merely descheduled.
            cmd = [self.redlockd, "--listen", "127.0.0.1:%d" % port, "--masters", masters,
                   "--node-timeout-ms", "250", "--auth-tokens-file", tokens]
            with open(self.service_log, "a") as logf:
                p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
            # /readyz: a quorum of masters judged and trusted; /healthz would only say
            # that it serves HTTP.
            wait_until(lambda: p.poll() is not None or http_status(url + "/readyz") == 200,
                       20, "redlockd at %s to answer /readyz" % url)
            if p.poll() is None:
                return p, url
            p.wait()
        raise StackError("redlockd did not start; its log:\n" + tail(self.service_log))

    def env(self):
        e = dict(os.environ)
        e["REDLOCK_URL"] = self.url
        e["REDLOCK_TEST_TOKEN"] = TOKEN
        e["REDLOCK_TEST_MASTER_PIDS"] = ",".join(str(p.pid) for p, _ in self.masters)
        e["REDLOCK_TEST_MASTER_PORTS"] = ",".join(str(port) for _, port in self.masters)
        e["REDLOCK_URL_B"] = self.url_b
        e["REDLOCK_TEST_SERVICE_PIDS"] = "%d,%d" % (self.service.pid, self.second.pid)
        e["REDLOCK_TEST_RELAY_URL"] = "http://127.0.0.1:%d" % self.relay.port
        e["REDLOCK_TEST_RELAY_CONTROL"] = "127.0.0.1:%d" % self.relay.control_port
        return e

    def stop(self):
        """Stop what we started; returns False when the service's own exit status (under
        REDLOCK_TEST_GRACEFUL) reports a failure."""
        ok = True
        graceful = os.environ.get("REDLOCK_TEST_GRACEFUL") == "1"
        if self.relay is not None:
            self.relay.stop()
        for p in [m for m, _ in self.masters] + [self.service, self.second]:
            if p is not None and p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)   # a test may have left it frozen
                except ProcessLookupError:
                    pass
        for svc in (self.service, self.second):
            if svc is None:
                continue
            if svc.poll() is None:
                if graceful:
                    svc.send_signal(signal.SIGTERM)
                else:
                    svc.kill()
            try:
                rc = svc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                svc.kill()
                rc = svc.wait()
            if graceful and rc != 0:
                log("redlockd exited with status %d; its log:\n%s" % (rc, tail(self.service_log)))
                ok = False
        for p, _ in self.masters:
            if p.poll() is None:
                p.kill()
        for p, _ in self.masters:
            p.wait()
        if self.keep:
            log("kept " + self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return ok


def main():
    ap = argparse.ArgumentParser(
        description="Run CMD against 5 real redis-server masters and a real redlockd.",
        usage="%(prog)s [--redlockd PATH] [--keep] -- CMD ARGS...")
    ap.add_argument("--redlockd", help="the service binary (default: $REDLOCKD_BIN, "
                    "./bin/redlockd, then the bin/redlockd next to this script)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary directory (logs, tokens file)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command after --")

    stack = None
    child = None

    def forward(signum, _frame):
        # Ctrl-C or a kill: pass it on to the command, then tear down as usual.
        if child is not None and child.poll() is None:
            child.send_signal(signum)
        else:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)

    status = 1
    try:
        stack = Stack(find_redlockd(args.redlockd), args.keep)
        stack.start_masters()
        stack.start_service()
        log("redlockd %s (and %s, relayed at 127.0.0.1:%d), masters on ports %s" % (
            stack.url, stack.url_b, stack.relay.port,
            ",".join(str(port) for _, port in stack.masters)))
        try:
            child = subprocess.Popen(cmd, env=stack.env())
        except OSError as e:
            raise StackError("cannot run %s: %s" % (cmd[0], e))
        rc = child.wait()
        status = 128 - rc if rc < 0 else rc
        if status != 0:
            log("%s exited with status %d; redlockd's log ends with:\n%s" % (
                cmd[0], status, tail(stack.service_log, 2000)))
    except StackError as e:
        log(str(e))
        status = 1
    except KeyboardInterrupt:
        status = 130
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if stack is not None and not stack.stop() and status == 0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
