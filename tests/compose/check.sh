#!/bin/bash
# check.sh -- static checks of the container and host deploy files; needs no container engine.
#   docker-compose.yml + Dockerfile   composecheck.py (config -q and what it misses) + its self-test
#   docker-compose.tls.yml            merges; TLS-only masters, rediss://; and run on this host:
#                                     gen-certs.sh, a master with its arguments, its healthcheck,
#                                     bin/redlockd with its environment ready over verified TLS
#   deploy/redis-master.conf          a real redis-server accepts it and reports AOF/noeviction/master
#   deploy/redlockd.service           systemd-analyze verify (no unknown keys) and exposure <= 2.0;
#                                     RestartPreventExitStatus lists redlockd's real exit statuses
#                                     for a bad configuration and for a listen address in use
# Installs docker-compose with apt if it is missing (root only).  Usage: tests/compose/check.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PASSED=0 FAILED=0
ok()   { PASSED=$((PASSED + 1)); echo "ok   $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
skip() { echo "skip $*"; }

if ! command -v docker-compose >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "== installing docker-compose (apt)"
        export DEBIAN_FRONTEND=noninteractive
        for i in 1 2 3 4 5 6; do  # another apt may hold the dpkg lock
            apt-get install -y --no-install-recommends docker-compose >/dev/null 2>&1 && break
            apt-get update >/dev/null 2>&1 || true; sleep 10
        done
    fi
    command -v docker-compose >/dev/null || { echo "check.sh: docker-compose missing (apt-get install docker-compose)" >&2; exit 1; }
fi
# Debian's docker-compose runs on /usr/bin/python3, which therefore has PyYAML.
PY=/usr/bin/python3

TMP=$(mktemp -d /tmp/redlockd-check.XXXXXX)
REDIS_PID= FIRST_PID=
cleanup() {
    [ -z "${TLS_SVC:-}" ] || kill "$TLS_SVC" 2>/dev/null || true
    [ -z "${TLS_PID:-}" ] || kill "$TLS_PID" 2>/dev/null || true
    [ -z "$REDIS_PID" ] || kill "$REDIS_PID" 2>/dev/null || true
    [ -z "$FIRST_PID" ] || kill "$FIRST_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

echo "== docker-compose.yml and Dockerfile"
if "$PY" "$HERE/composecheck.py" --root "$ROOT"; then ok "composecheck"; else fail "composecheck"; fi
echo "== composecheck self-test (each deliberate breakage must be caught)"
if "$PY" "$HERE/composecheck.py" --root "$ROOT" --self-test > "$TMP/self.log"; then
    ok "composecheck self-test ($(tail -1 "$TMP/self.log"))"
else
    cat "$TMP/self.log"; fail "composecheck self-test"
fi

echo "== deploy/redis-master.conf under a real redis-server"
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    # Only dir (a path of the container) and the listener change; every other line is as shipped.
    sed "s|^dir .*|dir $TMP|" "$ROOT/deploy/redis-master.conf" > "$TMP/redis.conf"
    redis-server "$TMP/redis.conf" --port 0 --bind 127.0.0.1 --unixsocket "$TMP/redis.sock" \
        --daemonize no > "$TMP/redis.log" 2>&1 & REDIS_PID=$!
    for _ in $(seq 50); do [ -S "$TMP/redis.sock" ] && break; kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.1; done
    get() { redis-cli -s "$TMP/redis.sock" config get "$1" | sed -n 2p; }
    if [ -S "$TMP/redis.sock" ]; then
        got="appendonly=$(get appendonly) appendfsync=$(get appendfsync) maxmemory-policy=$(get maxmemory-policy) role=$(redis-cli -s "$TMP/redis.sock" role | head -1)"
        if [ "$got" = "appendonly=yes appendfsync=everysec maxmemory-policy=noeviction role=master" ]; then
            ok "redis-server accepts it: $got"
        else
            fail "redis-server runs it with $got"
        fi
    else
        cat "$TMP/redis.log"; fail "redis-server refused deploy/redis-master.conf"
    fi
    kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=
else
    skip "redis-server not installed"
fi

echo "== deploy/redlockd.service"
if command -v systemd-analyze >/dev/null; then
    # verify wants ExecStart to exist; everything else is checked as shipped.
    sed 's|^ExecStart=/usr/local/bin/redlockd|ExecStart=/bin/true|' "$ROOT/deploy/redlockd.service" > "$TMP/redlockd.service"
    out=$(systemd-analyze verify "$TMP/redlockd.service" 2>&1) && [ -z "$out" ] \
        && ok "systemd-analyze verify: no unknown keys or errors" || { echo "$out"; fail "systemd-analyze verify"; }
    score=$(systemd-analyze security --offline=true "$TMP/redlockd.service" 2>/dev/null \
            | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    if [ -n "$score" ] && awk "BEGIN{exit !($score <= 2.0)}"; then
        ok "systemd-analyze security: exposure $score (<= 2.0)"
    else
        fail "systemd-analyze security: exposure '${score:-?}' (want <= 2.0)"
    fi
else
    skip "systemd-analyze not installed"
fi
# RestartPreventExitStatus lists what bin/redlockd really exits with on a bad configuration
# and on a listen address in use (a first instance holds a port, a second one is refused).
if [ -x "$ROOT/bin/redlockd" ]; then
    prevent=" $(sed -n 's/^RestartPreventExitStatus=//p' "$ROOT/deploy/redlockd.service" | tr '\n' ' ') "
    bad=0; "$ROOT/bin/redlockd" --threads 0 > /dev/null 2>&1 || bad=$?
    "$ROOT/bin/redlockd" --masters 127.0.0.1:1 --listen 127.0.0.1:0 > "$TMP/first.log" 2>&1 & FIRST_PID=$!
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/first.log" | head -1)
        [ -n "$port" ] && break; kill -0 "$FIRST_PID" 2>/dev/null || break; sleep 0.05
    done
    inuse=none
    if [ -n "$port" ]; then
        inuse=0; "$ROOT/bin/redlockd" --masters 127.0.0.1:1 --listen "127.0.0.1:$port" > "$TMP/second.log" 2>&1 || inuse=$?
    fi
    kill "$FIRST_PID" 2>/dev/null || true; wait "$FIRST_PID" 2>/dev/null || true; FIRST_PID=
    if [ "$inuse" != none ] && [ "$bad" != 0 ] && [ "$inuse" != 1 ] && [ "$inuse" != "$bad" ] \
        && [[ "$prevent" == *" $bad "* ]] && [[ "$prevent" == *" $inuse "* ]]; then
        ok "RestartPreventExitStatus=$(echo $prevent) covers a bad configuration (exit $bad) and an address in use (exit $inuse)"
    else
        fail "RestartPreventExitStatus=$(echo $prevent): redlockd exits $bad on a bad configuration and $inuse on an address in use (each must be its own status, listed)"
    fi
else
    skip "bin/redlockd not built (make): RestartPreventExitStatus not checked against it"
fi
grep -q '^EnvironmentFile=/etc/redlockd/redlockd.env$' "$ROOT/deploy/redlockd.service" \
    && grep -q '^REDLOCK_MASTERS=' "$ROOT/deploy/redlockd.env.example" \
    && grep -q '^REDLOCK_LISTEN=' "$ROOT/deploy/redlockd.env.example" \
    && ok "redlockd.env.example sets REDLOCK_MASTERS and REDLOCK_LISTEN for the unit" \
    || fail "redlockd.env.example / EnvironmentFile mismatch"

echo "== docker-compose.tls.yml (TLS to the masters), run on this host"
# The merged file, then what it runs, for real: deploy/tls/gen-certs.sh's certificates, a
# redis-server with deploy/redis-master.conf and the variant's TLS arguments (container
# paths mapped to the temporary directory, port 6379 to a free one), the variant's
# healthcheck command, and bin/redlockd with the variant's environment (its master reached
# by address, hence ?server_name=redis1).
TLS_PID= TLS_SVC=
if docker-compose -f "$ROOT/docker-compose.yml" -f "$ROOT/docker-compose.tls.yml" config > "$TMP/tls.yml" 2> "$TMP/tls.err"; then
    ok "docker-compose.yml + docker-compose.tls.yml: config"
    # shellcheck disable=SC2016
    probs=$("$PY" - "$TMP/tls.yml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))["services"]
p = []
for n in ("redis1", "redis2", "redis3", "redis4", "redis5"):
    c = [str(x) for x in d[n]["command"]]
    arg = lambda k: c[c.index(k) + 1] if k in c else None
    if arg("--port") != "0" or arg("--tls-port") != "6379" or arg("--tls-auth-clients") != "yes":
        p.append(f"{n}: not TLS-only on 6379 with client certificates: {c}")
    if "--tls" not in d[n]["healthcheck"]["test"]:
        p.append(f"{n}: its healthcheck does not speak TLS")
env = d["redlockd"]["environment"]
want = ",".join(f"rediss://redis{i}:6379" for i in range(1, 6))
if env.get("REDLOCK_MASTERS") != want:
    p.append(f"REDLOCK_MASTERS is {env.get('REDLOCK_MASTERS')!r}, not {want!r}")
for k in ("REDLOCK_REDIS_TLS_CA_FILE", "REDLOCK_REDIS_TLS_CERT", "REDLOCK_REDIS_TLS_KEY"):
    if not env.get(k):
        p.append(f"redlockd: no {k}")
print("\n".join(p))
PYEOF
)
    if [ -z "$probs" ]; then ok "TLS variant: masters TLS-only with client certificates, healthchecks over TLS, redlockd on rediss://"
    else fail "TLS variant: $probs"; fi
    if command -v redis-server >/dev/null && command -v openssl >/dev/null && [ -x "$ROOT/bin/redlockd" ] \
        && "$ROOT/deploy/tls/gen-certs.sh" "$TMP/certs" > "$TMP/gen.log" 2>&1; then
        free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
        tport=$(free_port); lport=$(free_port)
        sed "s|^dir .*|dir $TMP|" "$ROOT/deploy/redis-master.conf" > "$TMP/redis-tls.conf"
        mapfile -t cmd < <("$PY" -c 'import sys, yaml; [print(x) for x in yaml.safe_load(open(sys.argv[1]))["services"]["redis1"]["command"][2:]]' "$TMP/tls.yml" \
                           | sed "s|^/tls/|$TMP/certs/redis/|; s|^6379\$|$tport|")
        mapfile -t hc < <("$PY" -c 'import sys, yaml; [print(x) for x in yaml.safe_load(open(sys.argv[1]))["services"]["redis1"]["healthcheck"]["test"][1:]]' "$TMP/tls.yml" \
                          | sed "s|^/tls/|$TMP/certs/redis/|")
        redis-server "$TMP/redis-tls.conf" "${cmd[@]}" --bind 127.0.0.1 --daemonize no > "$TMP/redis-tls.log" 2>&1 & TLS_PID=$!
        pong=
        n=${#hc[@]}  # the healthcheck's own command, pointed at the port: ... -p PORT ping
        for _ in $(seq 50); do pong=$("${hc[@]:0:n-1}" -p "$tport" "${hc[n-1]}" 2>/dev/null || true); [ "$pong" = PONG ] && break; sleep 0.1; done
        if [ "$pong" = PONG ]; then ok "TLS variant: a master with its arguments and gen-certs.sh's certificates answers its healthcheck"
        else fail "TLS variant: the master's healthcheck got '$pong' (see $TMP/redis-tls.log)"; fi
        env_of() { "$PY" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["services"]["redlockd"]["environment"][sys.argv[2]])' "$TMP/tls.yml" "$1" \
                   | sed "s|^/etc/redlockd/tls/|$TMP/certs/redlockd/|"; }
        REDLOCK_REDIS_TLS_CA_FILE=$(env_of REDLOCK_REDIS_TLS_CA_FILE) REDLOCK_REDIS_TLS_CERT=$(env_of REDLOCK_REDIS_TLS_CERT) \
        REDLOCK_REDIS_TLS_KEY=$(env_of REDLOCK_REDIS_TLS_KEY) REDLOCK_MASTERS="rediss://127.0.0.1:$tport?server_name=redis1" \
        REDLOCK_LISTEN=127.0.0.1:$lport "$ROOT/bin/redlockd" > "$TMP/redlockd-tls.log" 2>&1 & TLS_SVC=$!
        ready=
        for _ in $(seq 100); do
            ready=$(curl -s "http://127.0.0.1:$lport/readyz" 2>/dev/null || true)
            [[ "$ready" == *'"ready":true'* ]] && break; sleep 0.1
        done
        if [[ "$ready" == *'"ready":true'*'"tls":"verified"'* ]]; then
            ok "TLS variant: redlockd with its environment is ready over verified TLS"
        else
            fail "TLS variant: redlockd's /readyz: ${ready:-nothing} (see $TMP/redlockd-tls.log)"
        fi
        kill "$TLS_SVC" "$TLS_PID" 2>/dev/null || true; wait "$TLS_SVC" "$TLS_PID" 2>/dev/null || true
    else
        skip "TLS variant not run (needs redis-server, openssl, bin/redlockd)"
    fi
else
    cat "$TMP/tls.err"; fail "docker-compose.yml + docker-compose.tls.yml: config"
fi

echo "== environment variable names against redlockd --help"
if [ -x "$ROOT/bin/redlockd" ]; then
    known=$("$ROOT/bin/redlockd" --help 2>&1 | grep -o 'REDLOCK_[A-Z_]*' | sort -u)
    used=$(cat "$ROOT/docker-compose.yml" "$ROOT/docker-compose.tls.yml" "$ROOT/Dockerfile" "$ROOT/deploy/redlockd.env.example" \
               "$ROOT/deploy/redlockd.service" "$ROOT"/deploy/kubernetes/*.yaml "$ROOT"/deploy/kubernetes-tls/*.yaml \
           | grep -o 'REDLOCK_[A-Z_]*' | sort -u)
    # ${REDLOCK_...} in docker-compose.yml are compose's own substitutions (REDLOCK_PUBLISH).
    compose_vars=$(grep -o '\${REDLOCK_[A-Z_]*' "$ROOT/docker-compose.yml" | tr -d '${' | sort -u)
    known=$(printf '%s\n%s\n' "$known" "$compose_vars" | sed '/^$/d' | sort -u)
    unknown=$(comm -13 <(echo "$known") <(echo "$used"))
    if [ -z "$unknown" ]; then ok "every REDLOCK_* variable in the deploy files is one redlockd reads"
    else fail "variables redlockd does not know: $(echo $unknown)"; fi
else
    skip "bin/redlockd not built (make): variable names not checked"
fi

echo "compose-check: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
