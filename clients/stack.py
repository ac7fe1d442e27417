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

stops everything it started (by PID; a master left frozen by SIGSTOP is continued first)
and exits with CMD's status (128+N if CMD died of signal N).  The service is
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


class Stack:
    def __init__(self, redlockd, keep):
        self.redlockd = redlockd
        self.keep = keep
        self.tmp = tempfile.mkdtemp(prefix="redlock-clients.")
        self.masters = []      # (Popen, port), in order
        self.service = None    # Popen
        self.service_log = os.path.join(self.tmp, "redlockd.log")
        self.url = None

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
        tokens = os.path.join(self.tmp, "tokens")
        fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(TOKEN_LINE)
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
                self.service, self.url = p, url
                return
            p.wait()
        raise StackError("redlockd did not start; its log:\n" + tail(self.service_log))

    def env(self):
        e = dict(os.environ)
        e["REDLOCK_URL"] = self.url
        e["REDLOCK_TEST_TOKEN"] = TOKEN
        e["REDLOCK_TEST_MASTER_PIDS"] = ",".join(str(p.pid) for p, _ in self.masters)
        e["REDLOCK_TEST_MASTER_PORTS"] = ",".join(str(port) for _, port in self.masters)
        return e

    def stop(self):
        """Stop what we started; returns False when the service's own exit status (under
        REDLOCK_TEST_GRACEFUL) reports a failure."""
        ok = True
        graceful = os.environ.get("REDLOCK_TEST_GRACEFUL") == "1"
        for p, _ in self.masters:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)   # a test may have left it frozen
                except ProcessLookupError:
                    pass
        if self.service is not None:
            if self.service.poll() is None:
                if graceful:
                    self.service.send_signal(signal.SIGTERM)
                else:
                    self.service.kill()
            try:
                rc = self.service.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.service.kill()
                rc = self.service.wait()
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
        log("redlockd %s, masters on ports %s" % (
            stack.url, ",".join(str(port) for _, port in stack.masters)))
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
