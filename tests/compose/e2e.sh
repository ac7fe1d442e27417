#!/bin/bash
# e2e.sh -- `make compose-test`: build the project's images with podman and run docker-compose.yml
# for real (five Redis masters + redlockd), with docker-compose 1.29 driving podman's
# Docker-compatible API.  No Docker engine and no registry needed (root, Debian bookworm).
#
#   1. packages (podman runc debootstrap docker-compose redis-tools curl), only if missing
#   2. private podman storage and config under a work dir in /tmp
#   3. base image debian:bookworm-slim from debootstrap; a redis:7-alpine stand-in built from
#      Debian's redis-server
#   4. the host-network variant of docker-compose.yml (hostnet.py): redisN on 127.0.0.1:710N,
#      redlockd on 127.0.0.1:8180
#   5. build the redlockd image from the Dockerfile, `up`, wait for every healthcheck
#   6. check the containers (AOF/noeviction live on each master, redlockd non-root, healthy)
#   7. the integration suite against the stack (`make test-integration-external`, when the
#      Makefile has it) and smoke.py's API checks; both record responses, which must conform
#      to api/openapi.yaml
#   8. freeze one master (podman pause): grants still 201, /readyz still 200; stop another:
#      same; stop a third: 503 quorum_unavailable, /readyz 503; start them again: recovered
#   9. clean up everything, also on failure: the stack and its volumes, the podman API and
#      healthcheck processes, the work dir and its storage
#
# Environment:
#   E2E_ARTIFACTS=DIR   gets the container logs, build log and recorded responses of the run,
#                       replaced each run (default /tmp/redlockd-e2e-last)
#   E2E_KEEP=1          keeps the whole work dir too (its path is printed)
#   E2E_BASE_CACHE=FILE caches the debootstrap tarball between runs (default
#                       /var/tmp/redlockd-e2e/bookworm-minbase.tar, rebuilt after 7 days);
#                       E2E_BASE_CACHE= (empty) disables the cache
#   REDLOCK_E2E_PORT    redlockd's port on 127.0.0.1 (8180)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3                      # Debian's, which has PyYAML (docker-compose needs it)
PORT=${REDLOCK_E2E_PORT:-8180}; export REDLOCK_E2E_PORT=$PORT
MASTERS=127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103,127.0.0.1:7104,127.0.0.1:7105
URL=http://127.0.0.1:$PORT
P=redlockd-e2e                            # compose project name
BASE_CACHE=${E2E_BASE_CACHE-/var/tmp/redlockd-e2e/bookworm-minbase.tar}
ART=${E2E_ARTIFACTS:-/tmp/redlockd-e2e-last}  # logs + recorded responses of the last run
case "$ART" in /|/tmp|/var/tmp|"$HOME") echo "E2E_ARTIFACTS=$ART: use a dir of its own" >&2; exit 2;; esac
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
die()  { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (podman rootful, apt-get)"
for p in 7101 7102 7103 7104 7105 "$PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then die "port $p is already in use on 127.0.0.1"; fi
done

step "packages"
need=""
for p in podman runc debootstrap docker-compose redis-tools curl python3-yaml; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
    echo "installing:$need"
    export DEBIAN_FRONTEND=noninteractive
    i=0
    until apt-get install -y --no-install-recommends $need > /tmp/redlockd-e2e-apt.log 2>&1; do
        i=$((i + 1)); [ $i -ge 10 ] && { tail -20 /tmp/redlockd-e2e-apt.log; die "apt-get install$need"; }
        [ $i -ge 2 ] && apt-get update >> /tmp/redlockd-e2e-apt.log 2>&1 || true
        sleep 15                                       # the dpkg lock may be held by another apt
    done
fi

W=$(mktemp -d /tmp/redlockd-e2e.XXXXXX)
SVC_PID= HC_PID=
export CONTAINERS_STORAGE_CONF=$W/storage.conf CONTAINERS_CONF=$W/containers.conf
export DOCKER_HOST=unix://$W/podman.sock
compose() { docker-compose -p "$P" -f "$W/compose.host.yml" "$@"; }
cid() { compose ps -q "$1"; }

exec 3>&1 4>&2                            # the real stdout/stderr, for the clean-up
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    set +e
    exec 1>&3 2>&4                        # an interrupt may land inside a redirected command
    step "clean up (logs and recorded responses kept in $ART)"
    rm -rf "$ART"; mkdir -p "$ART"
    if [ -S "$W/podman.sock" ]; then
        compose ps > "$ART"/ps.txt 2>&1
        compose logs --no-color > "$ART"/compose.log 2>&1
        if [ $rc != 0 ]; then
            echo "== containers and the last lines of redlockd's log (failure, exit $rc)"
            sed 's/^/   /' "$ART"/ps.txt
            grep '^redlockd_1' "$ART"/compose.log | tail -25 | sed 's/^/   /'
        fi
    fi
    cp "$W"/*.log "$W"/*.jsonl "$W"/compose.host.yml "$ART"/ 2> /dev/null
    [ -S "$W/podman.sock" ] && timeout 60 docker-compose -p "$P" -f "$W/compose.host.yml" down -v -t 2 > /dev/null 2>&1
    [ -n "$HC_PID" ] && kill "$HC_PID" 2> /dev/null
    [ -n "$SVC_PID" ] && kill "$SVC_PID" 2> /dev/null
    [ -n "$SVC_PID" ] && wait "$SVC_PID" 2> /dev/null
    if [ -f "$W/storage.conf" ]; then
        podman rm -af -t 0 > /dev/null 2>&1
        podman system reset -f > /dev/null 2>&1          # only our graphroot/runroot under $W
    fi
    # Anything podman left mounted under $W (overlay, shm) must go before the files.
    grep -o " $W[^ ]*" /proc/mounts 2> /dev/null | sort -r | xargs -r -n1 umount -l 2> /dev/null
    if [ "${E2E_KEEP:-0}" = 1 ]; then echo "kept $W"; else rm -rf "$W"; fi
    if [ $rc = 0 ]; then step "PASS (total $(( $(date +%s) - T0 ))s)"; else echo "compose-test: FAILED (exit $rc)"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "podman config in $W"
mkdir -p "$W"/tmp "$W"/networks
cat > "$W"/storage.conf <<EOF
[storage]
driver = "overlay"
graphroot = "$W/storage"
runroot = "$W/run"
EOF
cat > "$W"/containers.conf <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]  # no CAP_SYS_RESOURCE here
[engine]
runtime = "runc"            # crun 1.8 rejects this VM's hybrid cgroup layout
cgroup_manager = "cgroupfs" # no systemd
events_logger = "file"
tmp_dir = "$W/tmp"
[network]
network_config_dir = "$W/networks"
EOF

step "base image debian:bookworm-slim (debootstrap)"
if [ -n "$BASE_CACHE" ] && [ -s "$BASE_CACHE" ] && [ -n "$(find "$BASE_CACHE" -mtime -7)" ]; then
    echo "   from the cache $BASE_CACHE"
else
    MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    R=$W/rootfs
    debootstrap --variant=minbase bookworm "$R" ${MIRROR:+"$MIRROR"} > "$W"/debootstrap.log 2>&1 \
        || { tail -20 "$W"/debootstrap.log; die "debootstrap"; }
    rm -f "$R"/etc/apt/sources.list
    [ -f /etc/apt/sources.list.d/debian.sources ] && cp /etc/apt/sources.list.d/debian.sources "$R"/etc/apt/sources.list.d/
    printf 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n' > "$R"/etc/apt/apt.conf.d/99ci
    rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/cache/apt/*.bin "$R"/var/lib/apt/lists/*
    BASE_TAR=${BASE_CACHE:-$W/base.tar}
    mkdir -p "$(dirname "$BASE_TAR")"
    tar -C "$R" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
    rm -rf "$R"
fi
podman import --change 'CMD ["bash"]' "${BASE_CACHE:-$W/base.tar}" localhost/debian:bookworm-slim > /dev/null 2>&1
podman tag localhost/debian:bookworm-slim docker.io/library/debian:bookworm-slim
[ -z "$BASE_CACHE" ] && rm -f "$W/base.tar"

step "redis:7-alpine stand-in (Debian's redis-server)"
mkdir -p "$W"/redisimg
cat > "$W"/redisimg/Dockerfile <<'EOF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/*
CMD ["redis-server"]
EOF
podman build -q --pull=never --network host -t docker.io/library/redis:7-alpine "$W"/redisimg > "$W"/redisimg.log 2>&1 \
    || { tail -20 "$W"/redisimg.log; die "building the redis stand-in"; }

step "static check + host-network variant"
docker-compose -f "$ROOT"/docker-compose.yml config -q
docker-compose -f "$ROOT"/docker-compose.yml config | "$PY" "$HERE"/hostnet.py > "$W"/compose.host.yml

step "podman API service + healthcheck driver"
podman system service --time=0 "$DOCKER_HOST" > "$W"/service.log 2>&1 & SVC_PID=$!
# No systemd timers here: run due healthchecks every second ourselves.
( while :; do for c in $(podman ps -q --filter health=starting --filter health=unhealthy 2>/dev/null); do
      podman healthcheck run "$c" > /dev/null 2>&1 || true; done; sleep 1; done ) > /dev/null 2>&1 & HC_PID=$!
for _ in $(seq 100); do [ -S "$W/podman.sock" ] && break; sleep 0.1; done
[ -S "$W/podman.sock" ] || die "podman system service did not start: $(cat "$W"/service.log)"

step "build redlockd from the Dockerfile (multi-stage)"
compose build redlockd > "$W"/build.log 2>&1 || { tail -40 "$W"/build.log; die "docker-compose build"; }
grep -E '^(Successfully|STEP|Step)' "$W"/build.log | tail -3 | sed 's/^/   /' || true

step "up"
timeout 240 docker-compose -p "$P" -f "$W/compose.host.yml" up -d --no-build > "$W"/up.log 2>&1 \
    || { cat "$W"/up.log; die "docker-compose up"; }
for _ in $(seq 120); do
    curl -fsS "$URL/readyz" -o "$W"/readyz.json 2>/dev/null && break; sleep 0.5
done
[ -s "$W"/readyz.json ] || die "redlockd never became ready on $URL"
echo "   $(cat "$W"/readyz.json)"
health=starting
for _ in $(seq 60); do
    health=$(podman inspect --format '{{.State.Health.Status}}' "$(cid redlockd)" 2>/dev/null || echo "?")
    [ "$health" = healthy ] && break; sleep 1
done
[ "$health" = healthy ] || die "the redlockd container's healthcheck says $health"
echo "   redlockd container healthcheck: $health"

step "containers as configured"
for i in 1 2 3 4 5; do
    port=710$i
    got="$(redis-cli -p $port config get appendonly | tail -1) $(redis-cli -p $port config get appendfsync | tail -1)"
    got="$got $(redis-cli -p $port config get maxmemory-policy | tail -1) $(redis-cli -p $port role | head -1)"
    [ "$got" = "yes everysec noeviction master" ] || die "redis$i on $port runs with: $got"
done
echo "   redis1..5: appendonly yes, appendfsync everysec, noeviction, role master"
uid=$(podman exec "$(cid redlockd)" id -u)
[ "$uid" != 0 ] || die "redlockd runs as root in its container"
echo "   redlockd runs as uid $uid; $(podman exec "$(cid redlockd)" redlockd --version)"
echo "   binaries in the image: $(podman exec "$(cid redlockd)" ls /usr/local/bin | tr '\n' ' ')"

# From here on a failing check does not stop the run: every step runs and the summary names
# the ones that failed (the stack is still cleaned up by the trap).
PASSED_STEPS=0 FAILED_STEPS=()
try() {
    local name=$1; shift
    if "$@"; then PASSED_STEPS=$((PASSED_STEPS + 1)); else FAILED_STEPS+=("$name"); echo "FAIL step: $name"; fi
}
smoke() { "$PY" "$HERE"/smoke.py --url "$URL" --masters "$MASTERS" --record "$RECORD" "$@"; }

RECORD=$W/responses.jsonl; : > "$RECORD"
if make -C "$ROOT" -n test-integration-external > /dev/null 2>&1; then
    step "integration suite against the stack (make test-integration-external)"
    try "integration suite" env REDLOCK_TEST_URL="$URL" REDLOCK_TEST_MASTERS="$MASTERS" \
        REDLOCK_TEST_RECORD="$RECORD" make -C "$ROOT" --no-print-directory test-integration-external
else
    step "no test-integration-external target yet: smoke checks only"
fi

step "API smoke checks (smoke.py)"
try "smoke api" smoke api

step "freeze redis1 (podman pause)"
if podman pause "$(cid redis1)" > /dev/null 2>&1; then FROZEN=1; else
    echo "   podman pause is not available here: stopping redis1 instead"; FROZEN=0; podman stop -t 1 "$(cid redis1)" > /dev/null
fi
try "1 of 5 frozen" smoke degraded

step "stop redis2 as well (2 of 5 down)"
podman stop -t 2 "$(cid redis2)" > /dev/null
try "2 of 5 down" smoke degraded

step "stop redis3 as well (3 of 5 down: no quorum)"
podman stop -t 2 "$(cid redis3)" > /dev/null
try "3 of 5 down" smoke no-quorum

step "bring them back (their AOF keeps their data)"
if [ "$FROZEN" = 1 ]; then podman unpause "$(cid redis1)" > /dev/null; else podman start "$(cid redis1)" > /dev/null; fi
podman start "$(cid redis2)" "$(cid redis3)" > /dev/null
try "recovered" smoke recovered

step "recorded responses against api/openapi.yaml"
try "openapi conformance of $(wc -l < "$RECORD") recorded responses" node "$HERE"/conformance.mjs --coverage "$RECORD"

echo "compose-test: $PASSED_STEPS passed, ${#FAILED_STEPS[@]} failed"
if [ ${#FAILED_STEPS[@]} != 0 ]; then
    printf 'failed step: %s\n' "${FAILED_STEPS[@]}"
    exit 1
fi
