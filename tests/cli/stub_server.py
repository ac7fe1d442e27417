#!/usr/bin/env python3
"""stub_server.py -- an in-memory stand-in for redlockd's HTTP contract, for developing
and testing bin/redlock without Redis (`test_cli.py --stub`).  Not Redlock: one process,
one dict.  Extra routes for tests: DELETE /admin/locks/NAME drops a lock (a lost lease);
POST /admin/faults {...} replaces the faults injected into later answers:
  "patch_status": S        every PATCH answers HTTP S (503: quorum_unavailable), the lock
                           left as it is (an extension round that failed)
  "grant_validity_ms": V   a 201 reports validity V (slow rounds), the lock still lives ttl
  "grant_omit": [KEY...]   a 201 lacks these members (a malformed grant; the lock is held)

    python3 tests/cli/stub_server.py --listen 127.0.0.1:0 [--token T]
prints "listening on HOST:PORT" on stderr once it accepts connections."""
import argparse
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME_RE = re.compile(r"^[A-Za-z0-9._:/-]{1,255}$")
LEASE_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


class Store:
    def __init__(self, default_ttl=30000, max_ttl=3600000, max_wait=60000):
        self.cond = threading.Condition()
        self.locks = {}   # name -> (lease, expires_at monotonic seconds)
        self.fence = {}   # name -> last fencing token
        self.default_ttl, self.max_ttl, self.max_wait = default_ttl, max_ttl, max_wait

    def _live(self, name):
        held = self.locks.get(name)
        if held and held[1] <= time.monotonic():
            del self.locks[name]
            held = None
        return held


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "redlockd-stub"

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.server.verbose:
            sys.stderr.write("stub: " + fmt % args + "\n")

    def reply(self, status, obj, headers=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code, message, **extra):
        headers = extra.pop("_headers", None)
        obj = {"error": code, "message": message}
        obj.update(extra)
        self.reply(status, obj, headers)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n == 0:
            return {}
        raw = self.rfile.read(n)
        try:
            obj = json.loads(raw)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    def route(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        tok = self.server.token
        if tok and self.headers.get("Authorization") != "Bearer " + tok:
            self.error(401, "unauthorized", "a valid bearer token is required")
            return None
        path = urllib.parse.unquote(u.path)
        if path == "/admin/faults" and self.command == "POST":
            b = self.body()
            if b is None:
                self.error(400, "invalid_json", "the body must be a JSON object")
            else:
                self.server.faults = b
                self.reply(200, {"faults": b})
            return None
        if path in ("/healthz", "/readyz") and self.command == "GET":
            self.reply(200, {"ready": True, "quorum": 1, "masters": []})
            return None
        for prefix, admin in (("/admin/locks/", True), ("/locks/", False)):
            if path.startswith(prefix):
                name = path[len(prefix):]
                if not NAME_RE.match(name):
                    self.error(400, "invalid_name", "bad name")
                    return None
                return admin, name, q
        self.error(404, "not_found", "no such route")
        return None

    def do_GET(self):
        r = self.route()
        if not r:
            return
        _, name, _ = r
        st = self.server.store
        with st.cond:
            held = st._live(name)
            validity = int((held[1] - time.monotonic()) * 1000) if held else 0
            self.reply(200, {"name": name, "held": bool(held), "validity_ms": validity,
                             "fencing_token": st.fence.get(name, 0)})

    def do_POST(self):
        r = self.route()
        if not r:
            return
        _, name, q = r
        b = self.body()
        if b is None:
            return self.error(400, "invalid_json", "the body must be a JSON object")
        st = self.server.store
        ttl = b.get("ttl_ms", q.get("ttl_ms", st.default_ttl))
        wait = b.get("wait_ms", q.get("wait_ms", 0))
        try:
            ttl, wait = int(ttl), int(wait)
        except (TypeError, ValueError):
            return self.error(400, "invalid_ttl", "ttl_ms must be a positive integer")
        if not 1 <= ttl <= st.max_ttl:
            return self.error(400, "invalid_ttl", "ttl_ms must be a positive integer")
        if not 0 <= wait <= st.max_wait:
            return self.error(400, "invalid_wait", "wait_ms must be >= 0")
        lease = b.get("lease") or secrets.token_urlsafe(24)
        if not isinstance(lease, str) or not LEASE_RE.match(lease):
            return self.error(400, "invalid_lease", "bad lease")
        give_up = time.monotonic() + wait / 1000.0
        with st.cond:
            while True:
                held = st._live(name)
                if not held:
                    break
                left = give_up - time.monotonic()
                if left <= 0:
                    ra = max(1, int((held[1] - time.monotonic()) * 1000))
                    return self.error(409, "lock_held", "the lock is held by another lease",
                                      retry_after_ms=ra,
                                      _headers={"Retry-After": str(max(1, ra // 1000))})
                st.cond.wait(min(left, 0.02))
            st.fence[name] = st.fence.get(name, 0) + 1
            st.locks[name] = (lease, time.monotonic() + ttl / 1000.0)
            f = self.server.faults
            grant = {"name": name, "lease": lease, "fencing_token": st.fence[name],
                     "validity_ms": f.get("grant_validity_ms", ttl - 2), "ttl_ms": ttl}
            for k in f.get("grant_omit", []):
                grant.pop(k, None)
            self.reply(201, grant)

    def do_PATCH(self):
        r = self.route()
        if not r:
            return
        _, name, q = r
        b = self.body()
        if b is None:
            return self.error(400, "invalid_json", "the body must be a JSON object")
        st = self.server.store
        lease = b.get("lease")
        ttl = int(b.get("ttl_ms", st.default_ttl))
        if not isinstance(lease, str) or not LEASE_RE.match(lease):
            return self.error(400, "invalid_lease", "bad lease")
        status = self.server.faults.get("patch_status")
        if status:
            return self.error(status, "quorum_unavailable" if status == 503 else "injected",
                              "injected fault", nodes_ok=1, quorum=2)
        with st.cond:
            held = st._live(name)
            if not held or held[0] != lease:
                return self.error(404, "lease_not_found", "lease not found")
            st.locks[name] = (lease, time.monotonic() + ttl / 1000.0)
            self.reply(200, {"name": name, "fencing_token": st.fence[name],
                             "validity_ms": ttl - 2, "ttl_ms": ttl})

    def do_DELETE(self):
        r = self.route()
        if not r:
            return
        admin, name, q = r
        b = self.body()
        if b is None:
            return self.error(400, "invalid_json", "the body must be a JSON object")
        st = self.server.store
        with st.cond:
            if admin:
                st.locks.pop(name, None)
                st.cond.notify_all()
                return self.reply(200, {"name": name, "dropped": True})
            lease = b.get("lease", q.get("lease"))
            if not isinstance(lease, str) or not LEASE_RE.match(lease):
                return self.error(400, "invalid_lease", "bad lease")
            held = st._live(name)
            if not held or held[0] != lease:
                return self.error(404, "lease_not_found", "lease not found")
            del st.locks[name]
            st.cond.notify_all()
            self.reply(200, {"name": name, "released": True})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--token")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    srv.store, srv.token, srv.verbose, srv.faults = Store(), a.token, a.verbose, {}
    sys.stderr.write("listening on %s:%d\n" % srv.server_address[:2])
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
