#!/usr/bin/env python3
"""hostnet.py -- turn docker-compose.yml, as normalised by `docker-compose config` (stdin), into
the host-network variant that `make compose-test` runs under podman here (stdout):
every service on 127.0.0.1 (no ports:, no networks), redisN on port 7100+N, redlockd on
REDLOCK_E2E_PORT (default 8180) with REDLOCK_MASTERS pointing at the five, and the
masters' healthchecks probing the new ports (redlockd's `--probe` follows REDLOCK_LISTEN).  Images are built with the host network (apt-get)."""
import os
import sys

import yaml

PORT = os.environ.get("REDLOCK_E2E_PORT", "8180")
doc = yaml.safe_load(sys.stdin)
nodes = []
for name, s in doc["services"].items():
    for k in ("ports", "networks", "expose"):
        s.pop(k, None)
    s["network_mode"] = "host"
    if "build" in s:
        s["build"]["network"] = "host"
    if name.startswith("redis"):
        port = 7100 + int(name[5:])
        nodes.append(f"127.0.0.1:{port}")
        s["command"] = list(s.get("command") or ["redis-server"]) + ["--bind", "127.0.0.1", "--port", str(port)]
        s["healthcheck"]["test"] = ["CMD", "redis-cli", "-p", str(port), "ping"]
svc = doc["services"]["redlockd"]
env = svc.setdefault("environment", {})
env.update(REDLOCK_MASTERS=",".join(sorted(nodes)), REDLOCK_LISTEN=f"127.0.0.1:{PORT}")
# `redlockd --probe` alone reads REDLOCK_LISTEN (set above): kept as shipped; a probe of an
# explicit URL is pointed at the new port.
if any(str(w).startswith(("http://", "https://")) for w in svc["healthcheck"]["test"]):
    svc["healthcheck"]["test"] = ["CMD", "redlockd", "--probe", f"http://127.0.0.1:{PORT}/healthz"]
doc.pop("networks", None)
yaml.safe_dump(doc, sys.stdout, sort_keys=False)
