#!/usr/bin/python3
"""composecheck.py -- static checks of docker-compose.yml, Dockerfile and the Redis master
config that `docker-compose config -q` does not make.

Usage: composecheck.py [--root DIR]          check DIR (default: the repo) and exit 1 on failure
       composecheck.py --self-test           break copies of the files on purpose and make sure
                                             each breakage is caught

Needs docker-compose (1.29, Debian) and PyYAML (python3-yaml, which docker-compose depends on).
What it checks, beyond `config -q` (bad keys, undefined services, cycles, YAML errors):
  durations (healthcheck, stop_grace_period, Dockerfile HEALTHCHECK) parse as Go durations;
  every build context and dockerfile path exists; every `condition: service_healthy` target
  has a healthcheck; exactly five masters redis1..redis5, each with AOF (appendfsync everysec or
  always), maxmemory-policy noeviction, no replicaof/slaveof, its own named volume on its data
  dir and its config mounted read-only; redlockd names exactly those five in REDLOCK_MASTERS,
  waits for their health, has a healthcheck and publishes the port REDLOCK_LISTEN listens on,
  on 127.0.0.1 only unless REDLOCK_PUBLISH says otherwise (and the README says how); the
  masters publish nothing;
  the Dockerfile is multi-stage on debian:bookworm-slim, runs as non-root and has a HEALTHCHECK.
"""
import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

MASTERS = [f"redis{i}" for i in range(1, 6)]
SERVICE = "redlockd"
# Go's time.ParseDuration, which the Docker engine uses: "1m30s", "500ms", "2.5s"; no bare numbers.
GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)"
                         r"(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))*$")
DURATION_KEYS = ("interval", "timeout", "start_period", "start_interval")
# Redis directives that may repeat; for every other one the last occurrence wins.
MULTI = {"bind", "save", "rename-command", "include", "loadmodule", "user"}


class Checker:
    def __init__(self, root, quiet=False):
        self.root = os.path.abspath(root)
        self.quiet = quiet
        self.passed = 0
        self.failures = []

    def check(self, name, problems):
        """Record one named check; problems is a list of strings (empty: passed)."""
        if problems:
            self.failures.append(name)
            for p in problems:
                self.say(f"FAIL {name}: {p}")
        else:
            self.passed += 1
            self.say(f"ok   {name}")

    def say(self, msg):
        if not self.quiet:
            print(msg)


# Variables docker-compose.yml takes from the environment: unset for the checks of the
# defaults, whatever the caller's environment holds.
COMPOSE_VARS = ("REDLOCK_PUBLISH",)
OPEN_PUBLISH = "0.0.0.0:8080"   # what the README tells to set to open the service


def compose(root, *args, env=None):
    e = {k: v for k, v in os.environ.items() if k not in COMPOSE_VARS}
    e.update(env or {})
    return subprocess.run(["docker-compose", "-f", os.path.join(root, "docker-compose.yml"),
                           "--project-directory", root, *args],
                          capture_output=True, text=True, cwd=root, env=e)


def published_ports(service):
    """[(host_ip or None for every interface, host port, container port)] of a service."""
    out = []
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            out.append((p.get("host_ip"), str(p.get("published", "")), str(p.get("target"))))
            continue
        parts = str(p).split("/")[0].rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0].strip("[]"), parts[1], parts[2]))
        elif len(parts) == 2:
            out.append((None, parts[0], parts[1]))
        else:
            out.append((None, "", parts[0]))
    return out


def probes_listener(cmd, lport):
    """Whether a healthcheck command probes the service's own listener: `redlockd --probe`
    alone (it reads REDLOCK_LISTEN) or with a URL on lport."""
    words = cmd if isinstance(cmd, list) else str(cmd).replace("[", " ").replace("]", " ") \
        .replace('"', " ").replace(",", " ").split()
    words = [str(w) for w in words if str(w) not in ("CMD", "CMD-SHELL")]
    if "--probe" not in words:
        return False
    rest = words[words.index("--probe") + 1:]
    return not rest or rest[0].startswith("--") or f":{lport}/" in rest[0]


def parse_redis_conf(text):
    """Return {directive: [args...]} (MULTI directives: a list of arg lists)."""
    conf = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        key = words[0].lower()
        if key in MULTI:
            conf.setdefault(key, []).append(words[1:])
        else:
            conf[key] = words[1:]
    return conf


def redis_command_args(command):
    """Split a redis-server command into (config file or None, {directive: [args]})."""
    cmd = list(command or [])
    if isinstance(command, str):
        cmd = command.split()
    if cmd and os.path.basename(cmd[0]) in ("redis-server", "redis-stack-server"):
        cmd = cmd[1:]
    conf_file = None
    if cmd and not cmd[0].startswith("--"):
        conf_file, cmd = cmd[0], cmd[1:]
    args, key = {}, None
    for word in cmd:
        if word.startswith("--"):
            key = word[2:].lower()
            if key in MULTI:
                args.setdefault(key, []).append([])
            else:
                args[key] = []
        elif key is not None:
            (args[key][-1] if key in MULTI else args[key]).append(word)
    return conf_file, args


def parse_volume(v):
    """Normalise a short or long volume syntax entry into (source, target, read_only, type)."""
    if isinstance(v, dict):
        return v.get("source"), v.get("target"), bool(v.get("read_only")), v.get("type")
    parts = v.split(":")
    if len(parts) == 1:
        return None, parts[0], False, "volume"
    src, tgt = parts[0], parts[1]
    mode = parts[2] if len(parts) > 2 else "rw"
    kind = "bind" if src.startswith(("/", ".", "~")) else "volume"
    return src, tgt, "ro" in mode.split(","), kind


def dockerfile_info(path):
    """Parse a Dockerfile: stages (FROM lines), and for the last stage USER, EXPOSE, ENV and
    HEALTHCHECK (options and command)."""
    text = open(path).read()
    text = re.sub(r"\\\n", " ", text)   # join continuation lines
    info = {"from": [], "aliases": [], "user": None, "expose": [], "env": {}, "healthcheck": None}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr, rest = instr.upper(), rest.strip()
        if instr == "FROM":
            words = rest.split()
            info["from"].append(words[0])
            if len(words) >= 3 and words[1].upper() == "AS":
                info["aliases"].append(words[2])
            info.update(user=None, expose=[], env={}, healthcheck=None)  # new stage
        elif instr == "USER":
            info["user"] = rest
        elif instr == "EXPOSE":
            info["expose"] += [p.split("/")[0] for p in rest.split()]
        elif instr == "ENV":
            for m in re.finditer(r'(\w+)=("[^"]*"|\S+)', rest):
                info["env"][m.group(1)] = m.group(2).strip('"')
        elif instr == "HEALTHCHECK":
            opts = dict(re.findall(r"--([a-z-]+)=(\S+)", rest))
            cmd = re.sub(r"^(--[a-z-]+=\S+\s+)*", "", rest)
            info["healthcheck"] = {"opts": opts, "cmd": cmd}
    return info


def port_of(listen):
    m = re.search(r":(\d+)$", listen or "")
    return m.group(1) if m else None


def run_checks(root, quiet=False):
    c = Checker(root, quiet)
    path = os.path.join(root, "docker-compose.yml")

    # `config` validates as `config -q` does and prints the normalised file; it crashes on
    # some values that `config -q` lets through (a bad duration), so only when it fails is
    # `config -q` asked whether the file is valid at all (one slow start-up instead of two).
    r = compose(root, "config")
    normalised = r.returncode == 0 and r.stdout.strip()
    if not normalised:
        r = compose(root, "config", "-q")
    c.check("compose config -q", [] if r.returncode == 0 else
            [(r.stderr or r.stdout).strip() or f"exit {r.returncode}"])
    if r.returncode != 0:
        return c
    raw = yaml.safe_load(open(path))  # PyYAML resolves anchors and << merges too
    doc = yaml.safe_load(r.stdout) if normalised else raw
    services = doc.get("services", {})

    # Durations: from the raw file too, in case normalisation ever rewrites them.
    probs = []
    for src_name, src in (("normalised", services), ("raw", raw.get("services", {}))):
        for name, s in src.items():
            hc = s.get("healthcheck") or {}
            for k in DURATION_KEYS:
                if k in hc and not GO_DURATION.match(str(hc[k])):
                    probs.append(f"{name}: healthcheck.{k} {hc[k]!r} is not a duration like 5s or 1m30s")
            if "stop_grace_period" in s and not GO_DURATION.match(str(s["stop_grace_period"])):
                probs.append(f"{name}: stop_grace_period {s['stop_grace_period']!r} is not a duration")
    c.check("durations parse", sorted(set(probs)))

    # Build contexts and Dockerfiles.
    probs, images = [], {}
    for name, s in services.items():
        b = s.get("build")
        if b is None:
            continue
        b = {"context": b} if isinstance(b, str) else b
        ctx = os.path.join(root, b.get("context", "."))
        if not os.path.isdir(ctx):
            probs.append(f"{name}: build context {ctx} does not exist")
            continue
        df = os.path.join(ctx, b.get("dockerfile", "Dockerfile"))
        if not os.path.isfile(df):
            probs.append(f"{name}: dockerfile {df} does not exist")
            continue
        images[name] = dockerfile_info(df)
    c.check("build context and dockerfile exist", probs)

    # Healthchecks behind service_healthy.
    probs = []
    for name, s in services.items():
        deps = s.get("depends_on") or {}
        if isinstance(deps, list):
            continue
        for dep, cond in deps.items():
            if (cond or {}).get("condition") != "service_healthy":
                continue
            t = services.get(dep, {})
            hc = t.get("healthcheck")
            if hc and not hc.get("disable") and hc.get("test") not in (None, ["NONE"]):
                continue
            if dep in images and images[dep]["healthcheck"]:
                continue
            probs.append(f"{name} waits for {dep} to be healthy, but {dep} has no healthcheck")
    c.check("service_healthy targets have a healthcheck", probs)

    # The five masters.
    redis = sorted(n for n, s in services.items() if str(s.get("image", "")).split("/")[-1].startswith("redis"))
    c.check("five masters redis1..redis5", [] if redis == MASTERS else
            [f"Redis services are {redis}, expected {MASTERS}"])
    probs, data_volumes, ports = [], {}, {}
    for name in redis:
        s = services[name]
        conf_path, args = redis_command_args(s.get("command") or ["redis-server"])
        conf = {}
        if conf_path:
            mount = None
            for v in s.get("volumes") or []:
                src, tgt, ro, kind = parse_volume(v)
                if tgt == conf_path:
                    mount = (src, ro, kind)
            if mount is None or mount[2] != "bind":
                probs.append(f"{name}: config {conf_path} is not bind-mounted from the repo")
            else:
                if not mount[1]:
                    probs.append(f"{name}: config {conf_path} is mounted read-write (mount it :ro)")
                host = mount[0] if os.path.isabs(mount[0]) else os.path.join(root, mount[0])
                if not os.path.isfile(host):
                    probs.append(f"{name}: config file {host} does not exist")
                else:
                    conf = parse_redis_conf(open(host).read())
        else:
            probs.append(f"{name}: redis-server is not started with a config file from deploy/")
        eff = {**conf, **args}
        get = lambda k: " ".join(eff.get(k, [])).lower()  # noqa: E731
        if get("appendonly") != "yes":
            probs.append(f"{name}: appendonly is {get('appendonly') or 'unset (no)'}, must be yes")
        if get("appendfsync") not in ("everysec", "always"):
            probs.append(f"{name}: appendfsync is {get('appendfsync') or 'unset'}, must be everysec or always")
        if get("maxmemory-policy") != "noeviction":
            probs.append(f"{name}: maxmemory-policy is {get('maxmemory-policy') or 'unset'}, must be noeviction")
        for k in ("replicaof", "slaveof"):
            if k in eff:
                probs.append(f"{name}: {k} {get(k)} makes it a replica; masters must be independent")
        if not s.get("healthcheck"):
            probs.append(f"{name}: no healthcheck")
        if published_ports(s):
            probs.append(f"{name}: publishes {s.get('ports')}: a master must be reachable by "
                         "redlockd alone, not from the host's network")
        data_dir = get("dir") or "/data"
        vol = None
        for v in s.get("volumes") or []:
            src, tgt, ro, kind = parse_volume(v)
            if tgt == data_dir:
                vol = src if kind == "volume" and src else None
        if vol is None:
            probs.append(f"{name}: no named volume on its data dir {data_dir}")
        else:
            data_volumes.setdefault(vol, []).append(name)
        ports[name] = get("port") or "6379"
    for vol, users in data_volumes.items():
        if len(users) > 1:
            probs.append(f"volume {vol} is shared by {users}: each master needs its own data")
    c.check("masters: AOF, noeviction, no replication, own volume, config read-only, unpublished", probs)

    # The service.
    probs = []
    s = services.get(SERVICE)
    if s is None:
        probs.append(f"no service named {SERVICE}")
    else:
        env = s.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env if "=" in e)
        masters = [m.strip() for m in str(env.get("REDLOCK_MASTERS", "")).split(",") if m.strip()]
        want = [f"{n}:{ports.get(n, '6379')}" for n in redis]
        if sorted(masters) != sorted(want):
            probs.append(f"REDLOCK_MASTERS lists {masters}, expected the masters {want}")
        deps = s.get("depends_on") or {}
        for n in redis:
            cond = deps.get(n) if isinstance(deps, dict) else None
            if (cond or {}).get("condition") != "service_healthy":
                probs.append(f"{SERVICE} does not wait for {n} with condition: service_healthy")
        if not s.get("healthcheck") and not (SERVICE in images and images[SERVICE]["healthcheck"]):
            probs.append(f"{SERVICE} has no healthcheck")
        listen = env.get("REDLOCK_LISTEN") or (images.get(SERVICE) or {}).get("env", {}).get("REDLOCK_LISTEN")
        lport = port_of(listen)
        if not lport:
            probs.append(f"REDLOCK_LISTEN {listen!r} has no port")
        published = [target for _, _, target in published_ports(s)]
        if lport and lport not in published:
            probs.append(f"{SERVICE} listens on {lport} but publishes {published or 'no port'}")
        test = (s.get("healthcheck") or {}).get("test") or []
        if lport and test and not probes_listener(test, lport):
            probs.append(f"{SERVICE} healthcheck {' '.join(map(str, test))!r} does not probe port {lport}")
    c.check(f"{SERVICE}: masters, depends_on, healthcheck, ports", probs)

    # Not open to strangers: the host's loopback by default, REDLOCK_PUBLISH to open it.
    probs = []
    s = services.get(SERVICE) or {}
    for ip, host_port, target in published_ports(s):
        if ip not in ("127.0.0.1", "::1", "localhost"):
            probs.append(f"{SERVICE} publishes {host_port or '?'}->{target} on "
                         f"{ip or 'every interface'} by default, not 127.0.0.1")
    if s and not published_ports(s):
        probs.append(f"{SERVICE} publishes no port")
    r = compose(root, "config", env={"REDLOCK_PUBLISH": OPEN_PUBLISH})
    opened = yaml.safe_load(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    ips = [ip for ip, _, _ in published_ports((opened.get("services") or {}).get(SERVICE) or {})]
    if "0.0.0.0" not in ips:
        probs.append(f"REDLOCK_PUBLISH={OPEN_PUBLISH} does not open it (published on {ips or 'nothing'})")
    for doc in ("README.md", "deploy/README.md"):
        p = os.path.join(root, doc)
        if os.path.exists(p) and f"REDLOCK_PUBLISH={OPEN_PUBLISH}" in open(p).read():
            break
    else:
        probs.append(f"neither README.md nor deploy/README.md says REDLOCK_PUBLISH={OPEN_PUBLISH}")
    c.check(f"{SERVICE}: published on 127.0.0.1 by default, REDLOCK_PUBLISH opens it", probs)

    # The Dockerfile behind the service.
    probs = []
    img = images.get(SERVICE)
    if img is None:
        probs.append(f"{SERVICE} is not built from a Dockerfile")
    else:
        if len(img["from"]) < 2:
            probs.append("the Dockerfile is not multi-stage")
        for f in img["from"]:
            if f != "debian:bookworm-slim" and f not in img["aliases"]:
                probs.append(f"stage FROM {f}: expected debian:bookworm-slim")
        if not img["user"] or img["user"].split(":")[0] in ("0", "root"):
            probs.append(f"final stage runs as {img['user'] or 'root (no USER)'}")
        hc = img["healthcheck"]
        if not hc:
            probs.append("final stage has no HEALTHCHECK")
        else:
            for k in ("interval", "timeout", "start-period", "start-interval"):
                if k in hc["opts"] and not GO_DURATION.match(hc["opts"][k]):
                    probs.append(f"HEALTHCHECK --{k}={hc['opts'][k]} is not a duration")
        lport = port_of(img["env"].get("REDLOCK_LISTEN"))
        if lport is None:
            probs.append("final stage sets no REDLOCK_LISTEN")
        elif lport not in img["expose"]:
            probs.append(f"REDLOCK_LISTEN port {lport} is not EXPOSEd ({img['expose']})")
        elif hc and not probes_listener(hc["cmd"], lport):
            probs.append(f"HEALTHCHECK {hc['cmd']} does not probe port {lport}")
    c.check("Dockerfile: multi-stage bookworm-slim, non-root, HEALTHCHECK, EXPOSE", probs)
    return c


# ---- self-test: each breakage must make the expected check fail ----------------------

def self_test(root):
    def mutate_compose(fn):
        def apply(d):
            p = os.path.join(d, "docker-compose.yml")
            doc = yaml.safe_load(open(p))
            fn(doc)
            yaml.safe_dump(doc, open(p, "w"), sort_keys=False)
        return apply

    def mutate_file(rel, old, new):
        def apply(d):
            p = os.path.join(d, rel)
            text = open(p).read()
            assert old in text, f"self-test: {old!r} not in {rel}"
            open(p, "w").write(text.replace(old, new))
        return apply

    def svc(name):
        return lambda doc: doc["services"][name]

    cases = [
        ("bad healthcheck duration", "durations parse",
         mutate_compose(lambda d: svc("redis2")(d)["healthcheck"].update(interval="2x"))),
        ("bare-number stop_grace_period", "durations parse",
         mutate_compose(lambda d: svc(SERVICE)(d).update(stop_grace_period="10"))),
        ("missing dockerfile", "build context and dockerfile exist",
         mutate_compose(lambda d: svc(SERVICE)(d)["build"].update(dockerfile="Dockerfile.nope"))),
        ("service_healthy target without healthcheck", "service_healthy targets have a healthcheck",
         mutate_compose(lambda d: svc("redis3")(d).pop("healthcheck"))),
        ("only four masters", "five masters redis1..redis5",
         mutate_compose(lambda d: (d["services"].pop("redis5"),
                                   [v.pop("redis5", None) for v in [svc(SERVICE)(d)["depends_on"]]]))),
        ("AOF off in the config file", "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_file("deploy/redis-master.conf", "appendonly yes", "appendonly no")),
        ("eviction policy on the command line", "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_compose(lambda d: svc("redis1")(d)["command"].extend(["--maxmemory-policy", "allkeys-lru"]))),
        ("a replica", "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_compose(lambda d: svc("redis2")(d)["command"].extend(["--replicaof", "redis1", "6379"]))),
        ("shared data volume", "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_compose(lambda d: svc("redis2")(d).update(
             volumes=[v.replace("redis2-data", "redis1-data") for v in svc("redis2")(d)["volumes"]]))),
        ("config mounted read-write", "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_compose(lambda d: svc("redis4")(d).update(
             volumes=[v.replace(":ro", "") for v in svc("redis4")(d)["volumes"]]))),
        ("REDLOCK_MASTERS misses a master", f"{SERVICE}: masters, depends_on, healthcheck, ports",
         mutate_compose(lambda d: svc(SERVICE)(d)["environment"].update(
             REDLOCK_MASTERS="redis1:6379,redis2:6379,redis3:6379,redis4:6379"))),
        ("service does not wait for a master", f"{SERVICE}: masters, depends_on, healthcheck, ports",
         mutate_compose(lambda d: svc(SERVICE)(d)["depends_on"]["redis4"].update(condition="service_started"))),
        ("wrong published port", f"{SERVICE}: masters, depends_on, healthcheck, ports",
         mutate_compose(lambda d: svc(SERVICE)(d).update(ports=["8080:9090"]))),
        ("Dockerfile runs as root", "Dockerfile: multi-stage bookworm-slim, non-root, HEALTHCHECK, EXPOSE",
         mutate_file("Dockerfile", "USER 10001:10001", "USER root")),
        ("Dockerfile without HEALTHCHECK", "Dockerfile: multi-stage bookworm-slim, non-root, HEALTHCHECK, EXPOSE",
         mutate_file("Dockerfile", "HEALTHCHECK --interval", "# HEALTHCHECK --interval")),
        ("service published on every interface",
         f"{SERVICE}: published on 127.0.0.1 by default, REDLOCK_PUBLISH opens it",
         mutate_compose(lambda d: svc(SERVICE)(d).update(ports=["8080:8080"]))),
        ("REDLOCK_PUBLISH not honoured", f"{SERVICE}: published on 127.0.0.1 by default, REDLOCK_PUBLISH opens it",
         mutate_compose(lambda d: svc(SERVICE)(d).update(ports=["127.0.0.1:8080:8080"]))),
        ("a master published on the host",
         "masters: AOF, noeviction, no replication, own volume, config read-only, unpublished",
         mutate_compose(lambda d: svc("redis3")(d).update(ports=["127.0.0.1:6379:6379"]))),
        ("healthcheck probing another port", f"{SERVICE}: masters, depends_on, healthcheck, ports",
         mutate_compose(lambda d: svc(SERVICE)(d)["healthcheck"].update(
             test=["CMD", "redlockd", "--probe", "http://127.0.0.1:9999/healthz"]))),
        ("unknown compose key", "compose config -q",
         mutate_compose(lambda d: svc("redis1")(d).update(helthcheck={"test": ["NONE"]}))),
    ]
    base = run_checks(root, quiet=True)
    ok = not base.failures
    print(f"{'ok  ' if ok else 'FAIL'} self-test baseline: {base.passed} checks pass on the real files"
          + ("" if ok else f" (failing: {base.failures})"))
    passed, failed = (1, 0) if ok else (0, 1)
    for label, expect, apply in cases:
        with tempfile.TemporaryDirectory(prefix="composecheck.") as d:
            for rel in ("docker-compose.yml", "Dockerfile", "deploy/redis-master.conf", "README.md",
                        "deploy/README.md"):
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                shutil.copy(os.path.join(root, rel), os.path.join(d, rel))
            apply(d)
            res = run_checks(d, quiet=True)
        if expect in res.failures:
            passed += 1
            also = [f for f in res.failures if f != expect]
            print(f"ok   self-test: {label} -> caught by '{expect}'" + (f" (and {also})" if also else ""))
        else:
            failed += 1
            print(f"FAIL self-test: {label}: expected '{expect}' to fail, got {res.failures}")
    return passed, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if shutil.which("docker-compose") is None:
        sys.exit("composecheck: docker-compose not found (apt-get install docker-compose)")
    if a.self_test:
        passed, failed = self_test(a.root)
        print(f"composecheck self-test: {passed} breakages caught, {failed} missed")
        sys.exit(1 if failed else 0)
    c = run_checks(a.root)
    print(f"composecheck: {c.passed} checks passed, {len(c.failures)} failed")
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
