#!/bin/bash
# check.sh -- static checks of the container and host deploy files; needs no container engine.
#   docker-compose.yml + Dockerfile   composecheck.py (config -q and what it misses) + its self-test
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

echo "== environment variable names against redlockd --help"
if [ -x "$ROOT/bin/redlockd" ]; then
    known=$("$ROOT/bin/redlockd" --help 2>&1 | grep -o 'REDLOCK_[A-Z_]*' | sort -u)
    used=$(cat "$ROOT/docker-compose.yml" "$ROOT/Dockerfile" "$ROOT/deploy/redlockd.env.example" \
               "$ROOT/deploy/redlockd.service" "$ROOT"/deploy/kubernetes/*.yaml \
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
