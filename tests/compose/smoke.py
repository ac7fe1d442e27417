#!/usr/bin/env python3
"""smoke.py -- black-box checks of a running redlockd over HTTP, recording every response.

Usage: smoke.py --url http://127.0.0.1:8180 [--masters 127.0.0.1:7101,...] [--record F.jsonl] STEP
STEP:  api         the contract end to end: grant, 409 + Retry-After, inspect, extend, release,
                   fencing tokens increasing, idempotent retry, waiting, several names at once
                   (POST/DELETE /locks), every 4xx, X-Request-Id,
                   and (with --masters) the lock and fencing keys on the masters themselves
       degraded    a minority of masters is down or frozen: grants still 201, /readyz still 200
       no-quorum   a majority is down: POST 503 quorum_unavailable, /readyz 503
       recovered   /readyz back to 200 (waits up to 30 s) and a grant works again
Each response is appended to --record as one JSON line for conformance.mjs.  Standard library
only.  Prints ok/FAIL per check and "smoke STEP: N passed, N failed"; exit 1 on failure.
"""
import argparse
import http.client
import json
import re
import os
import socket
import subprocess
import sys
import time
import urllib.parse

PASSED, FAILED = 0, 0


def check(cond, what, detail=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print(f"ok   {what}")
    else:
        FAILED += 1
        print(f"FAIL {what}" + (f": {detail}" if detail else ""))
    return cond


class Client:
    def __init__(self, url, record):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.record = open(record, "a") if record else None

    def req(self, method, path, body=None, headers=None, raw=None, timeout=10):
        """One request on a fresh connection; returns (status, headers dict, parsed body)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = dict(headers or {})
        if data is not None and "Content-Type" not in hdrs:
            hdrs["Content-Type"] = "application/json"
        try:
            c.request(method, path, body=data, headers=hdrs)
            r = c.getresponse()
            text = r.read().decode("utf-8", "replace")
            rh = {k: v for k, v in r.getheaders()}
            status = r.status
        finally:
            c.close()
        ctype = next((v for k, v in rh.items() if k.lower() == "content-type"), "")
        try:
            parsed = json.loads(text) if "json" in ctype else text
        except ValueError:
            parsed = text
        if self.record:
            self.record.write(json.dumps({"method": method, "path": path.split("?")[0],
                                          "status": status, "headers": rh, "body": parsed}) + "\n")
            self.record.flush()
        return status, {k.lower(): v for k, v in rh.items()}, parsed


def redis_get(addr, key):
    """GET key on a master with redis-cli (None if unreachable or absent)."""
    host, port = addr.rsplit(":", 1)
    try:
        out = subprocess.run(["redis-cli", "-h", host, "-p", port, "--raw", "GET", key],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def redis_hget(addr, key, field):
    """HGET key field on a master with redis-cli (None if unreachable or absent)."""
    host, port = addr.rsplit(":", 1)
    try:
        out = subprocess.run(["redis-cli", "-h", host, "-p", port, "--raw", "HGET", key, field],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def bucket(name):
    """The service's counter bucket of a name: FNV-1a 64-bit modulo 16384."""
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return "b%d" % (h % 16384)


def uniq(prefix):
    return f"{prefix}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"


def step_api(c, masters, key_prefix):
    s, h, b = c.req("GET", "/healthz")
    check(s == 200, "GET /healthz 200", f"{s} {b}")
    s, h, b = c.req("GET", "/readyz")
    check(s == 200 and b.get("ready") is True, "GET /readyz 200 ready", f"{s} {b}")
    if masters and isinstance(b, dict):
        check(len(b.get("masters", [])) == len(masters) and all(m.get("ok") for m in b["masters"]),
              f"/readyz lists {len(masters)} masters, all ok", json.dumps(b))
        check(b.get("quorum") == len(masters) // 2 + 1, f"/readyz quorum is {len(masters) // 2 + 1}", json.dumps(b))

    name = uniq("smoke")
    s, h, g1 = c.req("POST", f"/locks/{name}", headers={"X-Request-Id": "smoke-req-1"})
    check(s == 201, "POST /locks/NAME 201", f"{s} {g1}")
    check(h.get("x-request-id") == "smoke-req-1", "X-Request-Id echoed", str(h.get("x-request-id")))
    g1 = g1 if isinstance(g1, dict) else {}
    lease = g1.get("lease", "")
    check(len(lease) == 32, "server lease is 32 characters", lease)
    check(isinstance(g1.get("fencing_token"), int) and g1["fencing_token"] >= 1, "fencing_token >= 1", str(g1))
    check(0 < g1.get("validity_ms", 0) <= g1.get("ttl_ms", 0) == 30000, "0 < validity_ms <= ttl_ms (default 30000)", str(g1))
    if masters:
        # the value is the lease, then its tag and stamps ('.', '@': docs/DESIGN.md section 14)
        held = [m for m in masters if re.split(r"[.@]", redis_get(m, key_prefix + name) or "")[0] == lease]
        check(len(held) >= len(masters) // 2 + 1, f"the lease is the value of {key_prefix}{name} on a quorum of masters",
              f"on {held}")
        fences = [redis_hget(m, f"{key_prefix}#master", bucket(name)) for m in masters]
        check(sum(f == str(g1.get("fencing_token")) for f in fences) >= len(masters) // 2 + 1,
              f"fencing counter {key_prefix}#master {bucket(name)} equals the token on a quorum",
              str(fences))

    s, h, b = c.req("POST", f"/locks/{name}")
    check(s == 409 and b.get("error") == "lock_held", "second POST 409 lock_held", f"{s} {b}")
    ra = h.get("retry-after", "")
    check(ra.isdigit() and int(ra) >= 1, "Retry-After >= 1 s", ra)
    check(isinstance(b.get("retry_after_ms"), int), "retry_after_ms present", str(b))

    s, h, b = c.req("GET", f"/locks/{name}")
    check(s == 200 and b.get("held") is True and b.get("fencing_token") == g1.get("fencing_token"),
          "GET: held, same token", f"{s} {b}")
    check("lease" not in b, "GET never shows the lease", str(b))

    s, h, b = c.req("PATCH", f"/locks/{name}", {"lease": lease, "ttl_ms": 20000})
    check(s == 200 and b.get("ttl_ms") == 20000 and b.get("fencing_token") == g1.get("fencing_token"),
          "PATCH extends, token unchanged", f"{s} {b}")
    s, h, b = c.req("PATCH", f"/locks/{name}", {"lease": "x" * 32, "ttl_ms": 20000})
    check(s == 404 and b.get("error") == "lease_not_found", "PATCH with a wrong lease 404 lease_not_found", f"{s} {b}")

    s, h, b = c.req("DELETE", f"/locks/{name}", {"lease": lease})
    check(s == 200 and b == {"name": name, "released": True}, "DELETE (lease in body) 200 released", f"{s} {b}")
    s, h, b = c.req("DELETE", f"/locks/{name}", {"lease": lease})
    check(s == 404 and b.get("error") == "lease_not_found", "DELETE again 404 lease_not_found", f"{s} {b}")
    s, h, b = c.req("GET", f"/locks/{name}")
    check(s == 200 and b.get("held") is False, "GET after release: not held", f"{s} {b}")

    s, h, g2 = c.req("POST", f"/locks/{name}?ttl_ms=5000")
    check(s == 201 and g2.get("fencing_token", 0) > g1.get("fencing_token", 0) and g2.get("ttl_ms") == 5000,
          "re-acquire: ttl_ms from the query, larger fencing token", f"{s} {g2}")
    s, h, b = c.req("DELETE", f"/locks/{name}?lease={g2.get('lease', '')}")
    check(s == 200, "DELETE ?lease= 200", f"{s} {b}")

    # Idempotent retry with a client lease.
    mine = "smoke-client-lease-" + str(os.getpid())
    s1, _, a = c.req("POST", f"/locks/{name}", {"lease": mine, "ttl_ms": 10000})
    s2, _, b = c.req("POST", f"/locks/{name}", {"lease": mine, "ttl_ms": 10000})
    check(s1 == 201 and s2 == 201 and a.get("fencing_token") == b.get("fencing_token") and b.get("lease") == mine,
          "retry with the same client lease: 201 twice, same token", f"{s1} {a} / {s2} {b}")
    c.req("DELETE", f"/locks/{name}", {"lease": mine})

    # Waiting: a 600 ms lock, then an acquirer that waits up to 3 s.
    s, _, short = c.req("POST", f"/locks/{name}", {"ttl_ms": 600})
    t0 = time.monotonic()
    s2, _, w = c.req("POST", f"/locks/{name}", {"wait_ms": 3000, "ttl_ms": 1000})
    dt = time.monotonic() - t0
    check(s == 201 and s2 == 201 and 0.2 < dt < 3.0 and w.get("fencing_token", 0) > short.get("fencing_token", 0),
          f"wait_ms: granted after the holder expired ({dt:.2f} s)", f"{s} {s2} {w}")
    c.req("DELETE", f"/locks/{name}", {"lease": w.get("lease", "x" * 16)})

    # Names with "/" (percent-encoded and raw).
    s, _, b = c.req("POST", f"/locks/{name}%2Fsub")
    check(s == 201 and b.get("name") == f"{name}/sub", "name with %2F decoded", f"{s} {b}")
    s, _, b2 = c.req("DELETE", f"/locks/{name}/sub", {"lease": b.get("lease", "x" * 16)})
    check(s == 200, "same name with a raw / releases it", f"{s} {b2}")

    # Several names under one lease: all or nothing, released by the lease alone.
    m1, m2, m3 = f"{name}.m1", f"{name}.m2", f"{name}.m3"
    s, _, mg = c.req("POST", "/locks", {"names": [m1, m2], "ttl_ms": 10000})
    check(s == 201 and mg.get("names") == [m1, m2] and sorted(mg.get("fencing_tokens", {})) == sorted([m1, m2])
          and all(isinstance(t, int) and t >= 1 for t in mg["fencing_tokens"].values()),
          "POST /locks 201 with one fencing token per name", f"{s} {mg}")
    mlease = mg.get("lease", "x" * 16) if isinstance(mg, dict) else "x" * 16
    s, h, b = c.req("POST", "/locks", {"names": [m3, m2]})
    check(s == 409 and b.get("error") == "lock_held" and h.get("retry-after"), "an overlapping set is 409 lock_held", f"{s} {b}")
    s, _, b = c.req("GET", f"/locks/{m3}")
    check(s == 200 and b.get("held") is False, "nothing of a refused set is kept", f"{s} {b}")
    s, _, b = c.req("DELETE", "/locks", {"lease": mlease})
    check(s == 200 and b.get("released") is True and sorted(b.get("names", [])) == sorted([m1, m2]),
          "DELETE /locks releases the set by its lease", f"{s} {b}")
    s, _, b = c.req("DELETE", f"/locks?lease={mlease}")
    check(s == 404 and b.get("error") == "lease_not_found", "a released set is 404 lease_not_found", f"{s} {b}")

    # Errors.
    for method, path, kw, status, code in [
        ("POST", f"/locks/{name}?ttl_ms=0", {}, 400, "invalid_ttl"),
        ("POST", f"/locks/{name}?ttl_ms=abc", {}, 400, "invalid_ttl"),
        ("POST", f"/locks/{name}?wait_ms=-1", {}, 400, "invalid_wait"),
        ("POST", f"/locks/{name}", {"body": {"ttl_ms": 99999999999}}, 400, "invalid_ttl"),
        ("POST", f"/locks/{name}", {"raw": b"{not json"}, 400, "invalid_json"),
        ("POST", f"/locks/{name}", {"body": {"ttl": 5}}, 400, "invalid_json"),
        ("POST", f"/locks/{name}", {"body": {"lease": "short"}}, 400, "invalid_lease"),
        ("POST", "/locks/bad%20name", {}, 400, "invalid_name"),
        ("POST", "/locks/" + "n" * 256, {}, 400, "invalid_name"),
        ("DELETE", f"/locks/{name}", {}, 400, "invalid_lease"),
        ("PATCH", f"/locks/{name}", {"body": {"ttl_ms": 1000}}, 400, "invalid_lease"),
        ("GET", "/nope", {}, 404, "not_found"),
        ("PUT", f"/locks/{name}", {}, 405, "method_not_allowed"),
        ("POST", "/readyz", {}, 405, "method_not_allowed"),
        ("POST", f"/locks/{name}", {"raw": b"{" + b" " * 70000 + b"}"}, 413, "body_too_large"),
        ("PATCH", "/locks", {}, 405, "method_not_allowed"),
        ("POST", "/locks", {}, 400, "invalid_json"),
        ("POST", "/locks", {"body": {"names": [m1, m1]}}, 400, "invalid_name"),
        ("POST", "/locks", {"body": {"names": [f"n{i}" for i in range(33)]}}, 400, "invalid_name"),
        ("DELETE", "/locks", {}, 400, "invalid_lease"),
        ("POST", "/locks", {"raw": b"{" + b" " * 70000 + b"}"}, 413, "body_too_large"),
        ("GET", "/healthz", {"raw": b"{" + b" " * 70000 + b"}"}, 413, "body_too_large"),
    ]:
        s, h, b = c.req(method, path, **kw)
        ok = s == status and isinstance(b, dict) and b.get("error") == code and isinstance(b.get("message"), str)
        check(ok, f"{method} {path[:40]} -> {status} {code}", f"{s} {b}")
        if status == 405:
            want = "GET, HEAD, POST, DELETE" if path == "/locks" else "GET, HEAD"
            check(want in h.get("allow", ""), f"405 has an Allow header with {want} ({h.get('allow')})")
    s, h, b = c.req("GET", "/healthz", headers={"X-Request-Id": "bad id with spaces"})
    check(h.get("x-request-id") not in (None, "", "bad id with spaces"), "an invalid X-Request-Id is replaced", str(h.get("x-request-id")))


def step_degraded(c, masters):
    s, h, b = c.req("GET", "/readyz")
    down = [m for m in b.get("masters", []) if not m.get("ok")] if isinstance(b, dict) else []
    check(s == 200 and b.get("ready") is True, "/readyz still 200 with a minority down", f"{s} {b}")
    check(len(down) >= 1, f"/readyz shows {len(down)} master(s) not ok", json.dumps(b))
    name = uniq("degraded")
    t0 = time.monotonic()
    s, h, g = c.req("POST", f"/locks/{name}")
    dt = (time.monotonic() - t0) * 1000
    check(s == 201, f"POST still 201 with a minority down ({dt:.0f} ms)", f"{s} {g}")
    s, h, b = c.req("GET", f"/locks/{name}")
    check(s == 200 and b.get("held") is True, "GET still sees it held", f"{s} {b}")
    s, h, b = c.req("DELETE", f"/locks/{name}", {"lease": g.get("lease", "x" * 16)})
    check(s == 200, "DELETE still 200", f"{s} {b}")


def step_no_quorum(c, masters):
    s, h, b = c.req("GET", "/readyz")
    check(s == 503 and isinstance(b, dict) and b.get("ready") is False, "/readyz 503 without a quorum", f"{s} {b}")
    s, h, b = c.req("POST", f"/locks/{uniq('noquorum')}")
    check(s == 503 and b.get("error") == "quorum_unavailable" and b.get("nodes_ok", 99) < b.get("quorum", 0),
          "POST 503 quorum_unavailable (nodes_ok < quorum)", f"{s} {b}")
    s, h, b = c.req("GET", "/healthz")
    check(s == 200, "/healthz still 200 (liveness is not readiness)", f"{s} {b}")


def step_recovered(c, masters):
    t0 = time.monotonic()
    deadline = t0 + 30
    s = None
    while time.monotonic() < deadline:
        try:
            s, h, b = c.req("GET", "/readyz", timeout=3)
        except (OSError, http.client.HTTPException):
            s = None
        if s == 200:
            break
        time.sleep(0.5)
    check(s == 200, f"/readyz back to 200 after the masters returned ({time.monotonic() - t0:.1f} s)")
    name = uniq("recovered")
    s, h, g = c.req("POST", f"/locks/{name}")
    check(s == 201, "POST 201 again", f"{s} {g}")
    if s == 201:
        c.req("DELETE", f"/locks/{name}", {"lease": g["lease"]})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--masters", default="")
    ap.add_argument("--key-prefix", default="redlock:")
    ap.add_argument("--record")
    ap.add_argument("step", choices=["api", "degraded", "no-quorum", "recovered"])
    a = ap.parse_args()
    c = Client(a.url, a.record)
    masters = [m for m in a.masters.split(",") if m]
    try:
        {"api": lambda: step_api(c, masters, a.key_prefix),
         "degraded": lambda: step_degraded(c, masters),
         "no-quorum": lambda: step_no_quorum(c, masters),
         "recovered": lambda: step_recovered(c, masters)}[a.step]()
    except (OSError, http.client.HTTPException, AttributeError, socket.timeout) as e:
        check(False, f"step {a.step} ran to the end", repr(e))
    print(f"smoke {a.step}: {PASSED} passed, {FAILED} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
