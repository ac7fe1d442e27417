#!/bin/bash
# scrape-metrics.sh -- a real redlockd's /metrics, for metricscheck.mjs: three redis-server
# masters (unix sockets in a temporary directory) and bin/redlockd on a free loopback port;
# a few requests so that the labelled series appear (grants, a conflict, a wait that runs
# out, extend, GET, release, a 404); then GET /metrics into OUT.  Everything it started is
# stopped on the way out.   Usage: tests/compose/scrape-metrics.sh OUT [REDLOCKD]
set -euo pipefail
OUT=$1
BIN=${2:-bin/redlockd}
TMP=$(mktemp -d /tmp/redlockd-scrape.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "scrape-metrics: $*" >&2; [ -f "$TMP/redlockd.log" ] && tail -5 "$TMP/redlockd.log" >&2; exit 1; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
    local end=$((SECONDS + $1)); shift
    until "$@" 2>/dev/null; do [ $SECONDS -lt $end ] || return 1; sleep 0.05; done
}

masters=
for i in 1 2 3; do
    mkdir "$TMP/m$i"
    redis-server --port 0 --unixsocket "$TMP/m$i/redis.sock" --save '' --appendonly no \
        --dir "$TMP/m$i" --daemonize no --logfile "$TMP/m$i/redis.log" & PIDS+=($!)
    masters="$masters${masters:+,}unix://$TMP/m$i/redis.sock"
done
for i in 1 2 3; do wait_for 10 test -S "$TMP/m$i/redis.sock" || die "redis-server $i did not start"; done
"$BIN" --masters "$masters" --listen 127.0.0.1:0 --node-timeout-ms 250 > "$TMP/redlockd.log" 2>&1 & PIDS+=($!)
port=
got_port() { port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/redlockd.log" | head -1); [ -n "$port" ]; }
wait_for 10 got_port || die "redlockd did not report its port"
U=http://127.0.0.1:$port
wait_for 15 curl -sf -o /dev/null "$U/readyz" || die "redlockd never became ready"

lease() { sed -n 's/.*"lease":"\([^"]*\)".*/\1/p'; }
L=$(curl -s -X POST "$U/locks/scrape?ttl_ms=10000" | lease)
[ -n "$L" ] || die "no grant"
curl -s -o /dev/null -X POST "$U/locks/scrape"                        # 409 held
curl -s -o /dev/null -X POST "$U/locks/scrape?wait_ms=200"            # a wait that runs out
curl -s -o /dev/null -X PATCH "$U/locks/scrape" -d "{\"lease\":\"$L\",\"ttl_ms\":10000}"
curl -s -o /dev/null "$U/locks/scrape"
curl -s -o /dev/null -X DELETE "$U/locks/scrape" -d "{\"lease\":\"$L\"}"
curl -s -o /dev/null -X DELETE "$U/locks/scrape" -d "{\"lease\":\"$L\"}"   # 404 lease gone
curl -s -o /dev/null "$U/nothing"                                      # 404 route
curl -sf "$U/metrics" > "$OUT" || die "GET /metrics failed"
echo "scrape-metrics: $(grep -vc '^#' "$OUT") samples from $BIN at $U"
