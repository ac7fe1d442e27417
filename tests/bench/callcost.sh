#!/usr/bin/env bash
# callcost.sh [REF]: what a lock script call costs one master apart from its op's work, REF's
# scripts (default main) against this tree's, in instructions counted by callgrind on one
# redis-server (independent of the machine's load).  The calls write nothing, so that every
# round meets the same keyspace: an exclusive acquire refused on a held name (GET, PTTL, the
# bucket's HGET), alone (SCRIPT_ACQUIRE) and 8 per SCRIPT_BATCH call, with a clock window
# (TIME) as the service sends them; N (2000) calls of each, the builds interleaved, two
# rounds (their spread is the noise).  Listens on 127.0.0.1 only; stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
REF=${1:-main}
N=${N:-2000}
T=$(mktemp -d /tmp/redlockd-callcost.XXXXXX)
PID=
cleanup() {
    [[ -n $PID ]] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
    rm -rf "$T"
}
trap cleanup EXIT
command -v valgrind >/dev/null || { echo "callcost: valgrind not found" >&2; exit 1; }

# printscript of each build (as profile.sh makes them)
sha=$(git rev-parse --verify -q "$REF^{commit}") || { echo "callcost: $REF: no such commit" >&2; exit 1; }
mkdir -p "$T/ref"
git archive --format=tar "$sha" service tests/bench/printscript.c | tar -x -C "$T/ref"
cc -std=c11 -D_GNU_SOURCE -O2 -I"$T/ref/service" -o "$T/ps-ref" "$T/ref/tests/bench/printscript.c" "$T"/ref/service/scripts*.c
cc -std=c11 -D_GNU_SOURCE -O2 -Iservice -o "$T/ps-now" tests/bench/printscript.c service/scripts*.c

P=$((20000 + RANDOM % 12000))
valgrind --tool=callgrind --callgrind-out-file="$T/cg.%p" --dump-instr=no --collect-atstart=yes \
    redis-server --port "$P" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" --logfile "$T/redis.log" \
    2>"$T/valgrind.log" &
PID=$!
for ((i = 0; i < 600; i++)); do
    [[ $(redis-cli -p "$P" ping 2>/dev/null) == PONG ]] && break
    sleep 0.1
done
R() { redis-cli -p "$P" "$@"; }
REC='p:#master'
R eval "for i = 0, 16383 do redis.call('HSET', KEYS[1], 'b' .. i, 1) end
redis.call('HSET', KEYS[1], 'cluster', 'c', 'run', 'r', 'base', 0, 'nb', 16384)" 1 "$REC" >/dev/null
R set p:held 'OTHER@1' >/dev/null
WIN=0:99999999999999

resp() { # N ARG...: N commands in RESP, %i in an argument replaced by the command's number
    local n=$1
    shift
    printf '%s\0' "$@" | awk -v n="$n" 'BEGIN { RS = "\0" } { a[++k] = $0 }
        END {
            for (i = 0; i < n; i++) {
                printf "*%d\r\n", k
                for (j = 1; j <= k; j++) { s = a[j]; gsub(/%i/, i, s); printf "$%d\r\n%s\r\n", length(s), s }
            }
        }'
}
for b in ref now; do
    acq=$(R script load "$("$T/ps-$b" acquire)")
    batch=$(R script load "$("$T/ps-$b" batch)")
    resp "$N" EVALSHA "$acq" 4 "$REC" p:held 'p:#r:held' 'p:#w:held' "$WIN" b7 L%i 30000 ch o 0 0 >"$T/$b-alone"
    keys=() argv=()
    for j in 0 1 2 3 4 5 6 7; do
        keys+=(p:held 'p:#r:held' 'p:#w:held')
        argv+=(a "b$j" "L%i_$j" 30000 ch o 0 0)
    done
    resp "$N" EVALSHA "$batch" 25 "$REC" "${keys[@]}" "$WIN" "${argv[@]}" >"$T/$b-batch8"
done

echo "callcost: $REF ($(git log -1 --format=%h "$sha")) against this tree ($(git log -1 --format=%h HEAD)$(git status --porcelain -- service | grep -q . && echo ' + changes')), instructions per call"
for round in 1 2; do
    for w in alone batch8; do
        line="round $round  $w:"
        for b in ref now; do
            callgrind_control -z "$PID" >/dev/null 2>&1
            out=$(redis-cli -p "$P" --pipe <"$T/$b-$w" 2>&1)
            grep -q 'errors: 0,' <<<"$out" || { echo "callcost: errors: $out" >&2; exit 1; }
            callgrind_control --dump="$b-$w" "$PID" >/dev/null 2>&1
            sleep 0.3
            d=$(ls -t "$T"/cg."$PID".* | head -1)
            ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$d")
            rm -f "$d"
            line+=$(printf '  %s %9d' "$b" $((ir / N)))
        done
        echo "$line"
    done
done
[[ $(R get p:held) == 'OTHER@1' ]] || { echo "callcost: the held key changed" >&2; exit 1; }
