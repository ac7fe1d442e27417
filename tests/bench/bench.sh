#!/usr/bin/env bash
# bench.sh -- runs the benchmarks behind `make bench`, `make bench-peers` and
# `make bench-plot` (see tests/bench/bench.mk for the knobs).
#
#   bench.sh service   5 redis-servers + redlockd: cycles at each BENCH_CONNS,
#                      contention, handoff, acquire-only, the HTTP floor and the
#                      raw-Redis ceiling (redis-benchmark running the service's
#                      own scripts), with the service/ceiling ratio
#   bench.sh peers     cycles at each BENCH_CONNS against redlockd,
#                      node-redlock behind Node's http (1 process, cluster of 2)
#                      and etcd's lock API, side by side with the ratios
#   bench.sh waiters   BENCH_WAITERS (10000) requests parked on one held name:
#                      the service's RSS and idle CPU, then the handoff chain
#   bench.sh plot      PNG of cycles/s and acquire p99 against concurrency
#   bench.sh publish   copy the latest results into tests/bench/results/
#
# Everything it starts listens on 127.0.0.1 only, in a temporary directory,
# and is stopped (by its own PID) when the script exits.  Runs are
# interleaved (run 1 of every point, then run 2, ...) so that a slow spell
# of the shared machine does not land on a single point; the reported figure
# of a point is the median of its runs, metric by metric.
set -euo pipefail

cd "$(dirname "$0")/../.."
WHAT=${1:-service}

SECS=${BENCH_SECONDS:-4}
WARM=${BENCH_WARMUP:-1}
RUNS=${BENCH_RUNS:-3}
CONNS=${BENCH_CONNS:-"1 16 64 256"}
HOT_CONNS=${BENCH_HOT_CONNS:-64}     # contention / handoff / acquire-only
FLOOR_CONNS=${BENCH_FLOOR_CONNS-64}  # HTTP floor points ("" for none)
ACQ_ONLY=${BENCH_ACQUIRE_ONLY:-0}    # 1: also an acquire-only point
NMASTERS=${BENCH_MASTERS:-5}
REDIS_N=${BENCH_REDIS_N:-50000}      # ceiling: commands per master per phase (pipelined; /5 unpipelined)
REDIS_PIPE=${BENCH_REDIS_PIPELINE:-32}
REDIS_CLIENTS=${BENCH_REDIS_CLIENTS:-32}
LOADGEN_THREADS=${BENCH_LOADGEN_THREADS:-1}
SVC_ARGS=${BENCH_SERVICE_ARGS:-}
OUT_ROOT=${BENCH_OUT:-build/bench/results}
BIN=${BENCH_BIN:-build/bench}
LOADGEN=$BIN/loadgen
FLOOR=$BIN/httpfloor
PRINTSCRIPT=$BIN/printscript
REDLOCKD=${REDLOCKD:-bin/redlockd}
PEERS_DIR=tests/bench/peers

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

need() {
    command -v "$1" >/dev/null 2>&1 || die "$1 not found (make bench-deps installs: $2)"
}

# ---------------------------------------------------------------- plot
plot() {
    local dir=${1:-} png
    if [[ -z $dir ]]; then
        for d in "$OUT_ROOT/latest-peers" "$OUT_ROOT/latest-service"; do
            [[ -f $d/summary.tsv ]] && { dir=$d; break; }
        done
    fi
    [[ -n $dir && -f $dir/summary.tsv ]] || die "no results to plot under $OUT_ROOT (run make bench first)"
    if ! command -v gnuplot >/dev/null 2>&1; then
        note "gnuplot not found (apt-get install gnuplot-nox): no plot"
        return 0
    fi
    png=${BENCH_PLOT:-$dir/bench.png}
    # one data file per target, cycle rows only: conns cycles/s acquire-p99
    local targets t files=() titles=()
    # the HTTP floor is an order of magnitude off the scale: it is in the tables only
    targets=$(awk -F'\t' 'NR > 1 && $2 == "cycle" && $1 != "http-floor" { print $1 }' "$dir/summary.tsv" | awk '!seen[$0]++')
    for t in $targets; do
        awk -F'\t' -v t="$t" 'NR > 1 && $1 == t && $2 == "cycle" { print $3, $4, $6 }' \
            "$dir/summary.tsv" | sort -n > "$dir/plot-$t.dat"
        files+=("$dir/plot-$t.dat")
        titles+=("$t")
    done
    local p1="" p2="" i
    for i in "${!files[@]}"; do
        p1+="${p1:+, }'${files[$i]}' using 1:2 with linespoints lw 2 pt 7 title '${titles[$i]}'"
        p2+="${p2:+, }'${files[$i]}' using 1:3 with linespoints lw 2 pt 7 title '${titles[$i]}'"
    done
    local load xt ceil=""
    load=$(tail -1 "$dir/load.txt" 2>/dev/null || true)
    xt=$(awk -F'\t' 'NR > 1 && $2 == "cycle" { print $3 }' "$dir/summary.tsv" | sort -n | uniq | paste -sd, -)
    if [[ -f $dir/ceiling.tsv ]]; then
        ceil=$(awk -F'\t' '$1 == "pipelined" { print $2 }' "$dir/ceiling.tsv")
        [[ -n $ceil ]] && p1+=", $ceil with lines dt 2 lw 2 lc rgb 'gray40' title 'raw-Redis ceiling (pipelined)'"
    fi
    gnuplot <<EOF
set terminal pngcairo size 1200,520 font ",10"
set output '$png'
set multiplot layout 1,2 title "lock cycles (POST + DELETE), 5 local Redis masters, closed loop — $(basename "$(readlink -f "$dir")")\n{/*0.8 $load}"
set logscale x 2
set xtics ($xt)
set xlabel 'concurrent connections'
set xrange [0.8:*]
set offsets 0, graph 0.08, graph 0.12, 0
set grid
set key below
set ylabel 'cycles/s'
set yrange [0:*]
plot $p1
set logscale y 10
set yrange [*:*]
set ylabel 'acquire p99 (ms, log)'
set offsets 0, graph 0.08, 0, 0
set key below
plot $p2
unset multiplot
EOF
    echo "bench: plot written to $png"
}

# publish: the latest service and peers results into tests/bench/results/
publish() {
    local w src dst
    for w in service peers; do
        src=$OUT_ROOT/latest-$w
        dst=tests/bench/results/$w
        if [[ ! -f $src/summary.tsv ]]; then
            note "no $w results under $OUT_ROOT: skipped"
            continue
        fi
        rm -rf "$dst"
        mkdir -p "$dst/raw"
        cp "$src"/{summary.tsv,report.txt,report.md,env.txt,load.txt} "$dst"/
        cp "$src"/raw/*.json "$dst/raw/"
        for f in ceiling.tsv bench.png redlockd.log; do
            if [[ -f $src/$f ]]; then cp "$src/$f" "$dst/"; fi
        done
        echo "bench: $(readlink -f "$src") -> $dst"
    done
}

if [[ $WHAT == plot ]]; then
    plot "${2:-}"
    exit 0
fi
if [[ $WHAT == publish ]]; then
    publish
    exit 0
fi
[[ $WHAT == service || $WHAT == peers || $WHAT == waiters || $WHAT == soak ]] ||
    die "usage: bench.sh service|peers|waiters|soak|plot|publish"

need jq jq
need redis-server redis-server
need redis-cli redis-tools
[[ -x $LOADGEN ]] || die "$LOADGEN missing (make bench-loadgen)"
[[ -x $REDLOCKD ]] || die "$REDLOCKD missing (make)"

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$OUT_ROOT/$WHAT-$STAMP
mkdir -p "$OUT"
ln -sfn "$(basename "$OUT")" "$OUT_ROOT/latest-$WHAT"
TMP=$(mktemp -d /tmp/redlockd-bench.XXXXXX)
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    # logs without the per-request access lines (hundreds of MB at info level)
    local f n
    for f in "$TMP"/*.log; do
        [[ -f $f ]] || continue
        n=$(grep -c '"msg":"request"' "$f" || true)
        { grep -v '"msg":"request"' "$f" || true; } >"$OUT/$(basename "$f")"
        if [[ ${n:-0} -gt 0 ]]; then echo "($n per-request log lines left out)" >>"$OUT/$(basename "$f")"; fi
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

USED_PORTS=" "
free_port() {
    local p i
    for ((i = 0; i < 500; i++)); do
        # below the kernel's ephemeral range (32768+ by default), where a
        # client socket can hold a port that nothing listens on
        p=$((20000 + RANDOM % 12000))
        [[ $USED_PORTS == *" $p "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            USED_PORTS+="$p "
            echo "$p"
            return 0
        fi
    done
    die "no free loopback port"
}

# wait_http PORT PATH SECONDS: until GET answers 200
wait_http() {
    local i
    for ((i = 0; i < $3 * 20; i++)); do
        if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1$2" 2>/dev/null) == 200 ]]; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# wait_port PORT SECONDS: until something accepts on 127.0.0.1:PORT
wait_port() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# cpu_ticks PID...: utime+stime of these processes and their children's threads
cpu_ticks() {
    local p t=0 kids
    for p in "$@"; do
        [[ -r /proc/$p/stat ]] || continue
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
        kids=$(cat /proc/"$p"/task/*/children 2>/dev/null || true)
        for k in $kids; do
            [[ -r /proc/$k/stat ]] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$k/stat")))
        done
    done
    echo "$t"
}
HZ=$(getconf CLK_TCK)

rss_kib() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# ---------------------------------------------------------------- masters
REDIS_PORTS=()
REDIS_PIDS=()
start_masters() {
    local i p pid try
    for ((i = 0; i < NMASTERS; i++)); do
        for ((try = 0; try < 5; try++)); do
            p=$(free_port)
            mkdir -p "$TMP/redis-$p"
            redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
                --dir "$TMP/redis-$p" --logfile "$TMP/redis-$p.log" --daemonize no &
            pid=$!
            if wait_redis "$p" "$pid"; then
                break
            fi
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            note "redis-server could not start on $p: $(tail -1 "$TMP/redis-$p.log" 2>/dev/null); another port"
            pid=
        done
        [[ -n $pid ]] || die "redis-server would not start"
        PIDS+=("$pid")
        REDIS_PORTS+=("$p")
        REDIS_PIDS+=("$pid")
    done
    MASTERS=$(printf '127.0.0.1:%s,' "${REDIS_PORTS[@]}")
    MASTERS=${MASTERS%,}
}

# wait_redis PORT PID: until it answers PING; false if it exits first
wait_redis() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

SVC_PORT=
SVC_PID=
start_service() {
    SVC_PORT=$(free_port)
    # shellcheck disable=SC2086
    "$REDLOCKD" --masters "$MASTERS" --listen "127.0.0.1:$SVC_PORT" $SVC_ARGS >"$TMP/redlockd.log" 2>&1 &
    SVC_PID=$!
    PIDS+=("$SVC_PID")
    if ! wait_http "$SVC_PORT" /readyz 15; then
        tail -20 "$TMP/redlockd.log" >&2
        die "redlockd did not become ready on 127.0.0.1:$SVC_PORT"
    fi
}

check_alive() { # NAME PID LOG
    if ! kill -0 "$2" 2>/dev/null; then
        note "$1 (pid $2) died; last lines of its log:"
        tail -20 "$3" >&2 || true
        exit 1
    fi
}

# ---------------------------------------------------------------- loadgen runs
# TARGETS: name -> "port|pids|log|loadgen extra args"
declare -A TARGET_PORT TARGET_PIDS TARGET_LOG TARGET_ARGS
TARGET_ORDER=()
add_target() {
    TARGET_ORDER+=("$1")
    TARGET_PORT[$1]=$2
    TARGET_PIDS[$1]=$3
    TARGET_LOG[$1]=$4
    TARGET_ARGS[$1]=${5:-}
}

# POINTS: "target|point|conns|loadgen args"
POINTS=()

# run_point RUN "target|point|conns|args": one loadgen run, raw JSON kept
run_point() {
    local run=$1 spec=$2 target point conns args port f c0 c1 rc0 rc1 rss load
    IFS='|' read -r target point conns args <<<"$spec"
    port=${TARGET_PORT[$target]}
    f="$OUT/raw/$target-$point-c$conns-run$run.json"
    mkdir -p "$OUT/raw"
    # shellcheck disable=SC2086
    set -- ${TARGET_PIDS[$target]}
    c0=$(cpu_ticks "$@")
    rc0=$(cpu_ticks "${REDIS_PIDS[@]}")
    # shellcheck disable=SC2086
    if ! "$LOADGEN" -p "$port" -c "$conns" -t "$LOADGEN_THREADS" -d "$SECS" -w "$WARM" --json \
        --label "$target" ${TARGET_ARGS[$target]} $args >"$f.tmp" 2>"$OUT/raw/loadgen.err"; then
        note "loadgen failed for $target $point c=$conns: $(cat "$OUT/raw/loadgen.err")"
        rm -f "$f.tmp"
        return 0
    fi
    c1=$(cpu_ticks "$@")
    rc1=$(cpu_ticks "${REDIS_PIDS[@]}")
    rss=0
    for p in "$@"; do rss=$((rss + $(rss_kib "$p"))); done
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    # CPU is over the whole run (warm-up included), in cores
    jq -c --argjson svc "$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v s="$SECS" -v w="$WARM" 'BEGIN { printf "%.3f", (b - a) / hz / (s + w) }')" \
        --argjson redis "$(awk -v a="$rc0" -v b="$rc1" -v hz="$HZ" -v s="$SECS" -v w="$WARM" 'BEGIN { printf "%.3f", (b - a) / hz / (s + w) }')" \
        --argjson rss "$rss" --arg load "$load" --arg point "$point" --arg run "$run" \
        '. + {target_cpu_cores: $svc, redis_cpu_cores: $redis, target_rss_kib: $rss, loadavg: $load, point: $point, run: ($run|tonumber)}' \
        "$f.tmp" >"$f"
    rm -f "$f.tmp"
    jq -r '"  run \(.run) \(.label) \(.point) c=\(.conns): cycles/s \(.cycles_per_s) grants/s \(.grants_per_s) 409/s \(.conflicts_per_s)  acq p50/p99/p999 \(.acquire.p50_ms)/\(.acquire.p99_ms)/\(.acquire.p999_ms) ms  errors \(.errors.total) \(.errors.codes)  cpu target \(.target_cpu_cores) redis \(.redis_cpu_cores)  load \(.loadavg)"' "$f"
    for p in "$@"; do check_alive "$target" "$p" "${TARGET_LOG[$target]}"; done
}

run_all_points() {
    local run spec
    for ((run = 1; run <= RUNS; run++)); do
        echo "bench: run $run of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg) load)"
        for spec in "${POINTS[@]}"; do
            run_point "$run" "$spec"
        done
    done
}

# summarize: medians over runs, one row per point, into summary.tsv
summarize() {
    local spec target point conns args files
    printf 'target\tpoint\tconns\tcycles_per_s\tacq_p50_ms\tacq_p99_ms\tacq_p999_ms\trel_p50_ms\trel_p99_ms\tgrants_per_s\tconflicts_per_s\tconflict_p99_ms\tgap_p50_ms\tgap_p99_ms\terrors\ttarget_cpu\tredis_cpu\tloadgen_cpu\trss_kib\truns\tsafety\terror_detail\n' >"$OUT/summary.tsv"
    for spec in "${POINTS[@]}"; do
        IFS='|' read -r target point conns args <<<"$spec"
        files=("$OUT/raw/$target-$point-c$conns"-run*.json)
        [[ -e ${files[0]} ]] || continue
        jq -s -r --arg t "$target" --arg p "$point" --arg c "$conns" '
            def med: sort | if length == 0 then 0 elif length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
            def r(n): . * pow(10; n) | round / pow(10; n);
            [$t, $p, $c,
             (map(.cycles_per_s) | med | r(0)),
             (map(.acquire.p50_ms) | med | r(3)), (map(.acquire.p99_ms) | med | r(3)),
             (map(.acquire.p999_ms) | med | r(3)),
             (map(.release.p50_ms) | med | r(3)), (map(.release.p99_ms) | med | r(3)),
             (map(.grants_per_s) | med | r(0)), (map(.conflicts_per_s) | med | r(0)),
             (map(.conflict.p99_ms) | med | r(3)),
             (map(.gap.p50_ms) | med | r(3)), (map(.gap.p99_ms) | med | r(3)),
             (map(.errors.total) | add),
             (map(.target_cpu_cores) | med | r(2)), (map(.redis_cpu_cores) | med | r(2)),
             (map(.loadgen_cpu_s / (.duration_s + .warmup_s)) | med | r(2)),
             (map(.target_rss_kib) | max),
             length,
             ("overlaps=\(map(.safety.overlaps // 0) | add) fence_regressions=\(map(.safety.fence_regressions // 0) | add) fence_missing=\(map(.safety.fence_missing // 0) | add)"),
             ([.[].errors | (.codes | to_entries[]),
                            (to_entries[] | select((.value | type) == "number" and .key != "total"
                                                   and .key != "server_close" and .value > 0))]
              | group_by(.key) | map("\(.[0].key)=\(map(.value) | add)") | join(", "))]
            | @tsv' "${files[@]}" >>"$OUT/summary.tsv"
    done
}

# col NAME TARGET POINT CONNS: one value of summary.tsv
col() {
    awk -F'\t' -v n="$1" -v t="$2" -v p="$3" -v c="$4" '
        NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
        $1 == t && $2 == p && $3 == c { print $idx[n]; exit }' "$OUT/summary.tsv"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "") printf "%.2f", a / b; else printf "-" }'; }

header() {
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
        echo "settings: BENCH_SECONDS=$SECS BENCH_WARMUP=$WARM BENCH_RUNS=$RUNS BENCH_CONNS='$CONNS' masters=$NMASTERS loadgen threads=$LOADGEN_THREADS"
        echo "redlockd: $("$REDLOCKD" --version 2>&1 | head -1) args: --masters <$NMASTERS local> $SVC_ARGS"
        echo "redis: $(redis-server --version | awk '{ print $3 }')"
        if [[ -n ${1:-} ]]; then echo "$1"; fi
    } | tee "$OUT/env.txt"
}

load_line() { echo "load before/after: $LOAD0 / $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load.txt"; }

# ---------------------------------------------------------------- ceiling
ACQ_SRC=
REL_SRC=
scripts_source() {
    BATCH_SRC=
    [[ -x $PRINTSCRIPT ]] && BATCH_SRC=$("$PRINTSCRIPT" batch 2>/dev/null)
    if [[ -x $PRINTSCRIPT ]] && ACQ_SRC=$("$PRINTSCRIPT" acquire) && REL_SRC=$("$PRINTSCRIPT" release); then
        SCRIPTS_FROM="service/scripts.c (exact)"
        return
    fi
    SCRIPTS_FROM="approximation (service/scripts.c not built)"
    ACQ_SRC="if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
return {0, redis.call('PTTL', KEYS[1]), f}"
    REL_SRC="if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0"
}

# The ceiling's arguments follow service/scripts.h: acquire KEYS lock, fence;
# ARGV lease, ttl.  release KEYS lock; ARGV lease, channel.  check_scripts
# runs each once and stops the bench when the replies do not match, so a
# change of signature cannot go unnoticed.
CEIL_LEASE=LEASEleaseLEASEleaseLEASElease12
check_scripts() {
    local p=${REDIS_PORTS[0]} a r
    a=$(redis-cli -p "$p" -n 1 eval "$ACQ_SRC" 2 ceil:check "ceil:#fence:check" "$CEIL_LEASE" 30000 | head -1)
    r=$(redis-cli -p "$p" -n 1 eval "$REL_SRC" 1 ceil:check "$CEIL_LEASE" "ceil:#chan:check" bench)
    redis-cli -p "$p" -n 1 flushdb >/dev/null
    if [[ $a != 1 || $r != 1 ]]; then
        die "the ceiling's script arguments no longer fit $SCRIPTS_FROM (acquire replied '$a', release '$r'): update check_scripts/ceiling_phase in $0"
    fi
}

errors_total() { # PORT...: error replies the masters have sent so far
    local p t=0 v
    for p in "$@"; do
        v=$(redis-cli -p "$p" info stats | tr -d '\r' | awk -F: '$1 == "total_error_replies" { print $2 }')
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

expires_db1() { # PORT...: keys with an expiry in db 1 (the lock keys)
    local p t=0 v
    for p in "$@"; do
        v=$(redis-cli -p "$p" info keyspace | tr -d '\r' | sed -n 's/^db1:keys=[0-9]*,expires=\([0-9]*\).*/\1/p')
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

# ceiling_phase N PIPELINE KIND: sets PHASE_SECS, the wall time of N commands
# on every master at once.  Keys are random in a key space of N per master
# (redis-benchmark's __rand_int__, drawn anew in each phase), so some
# acquires find their key taken and some releases find no key: the counts
# are reported next to the figure.
PHASE_SECS=
ceiling_phase() {
    local n=$1 pipe=$2 kind=$3 p t0 t1 e0 e1 pids=() i=0 shas=() src
    src=$ACQ_SRC
    [[ $kind == release ]] && src=$REL_SRC
    for p in "${REDIS_PORTS[@]}"; do shas+=("$(redis-cli -p "$p" script load "$src")"); done
    e0=$(errors_total "${REDIS_PORTS[@]}")
    t0=$(date +%s%N)
    for p in "${REDIS_PORTS[@]}"; do
        if [[ $kind == acquire ]]; then
            timeout 120 redis-benchmark -p "$p" --dbnum 1 -c "$REDIS_CLIENTS" -P "$pipe" -n "$n" -r "$n" --csv \
                evalsha "${shas[$i]}" 2 "ceil:__rand_int__" "ceil:#fence:__rand_int__" \
                "$CEIL_LEASE" 30000 >"$TMP/rb-$kind-$pipe-$i.csv" 2>&1 &
        else
            timeout 120 redis-benchmark -p "$p" --dbnum 1 -c "$REDIS_CLIENTS" -P "$pipe" -n "$n" -r "$n" --csv \
                evalsha "${shas[$i]}" 1 "ceil:__rand_int__" "$CEIL_LEASE" "ceil:#chan:__rand_int__" bench \
                >"$TMP/rb-$kind-$pipe-$i.csv" 2>&1 &
        fi
        pids+=($!)
        i=$((i + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || die "redis-benchmark failed: $(cat "$TMP"/rb-"$kind"-*.csv)"; done
    t1=$(date +%s%N)
    e1=$(errors_total "${REDIS_PORTS[@]}")
    if ((e1 > e0)); then
        die "the masters answered $((e1 - e0)) errors to the $kind script during the ceiling"
    fi
    PHASE_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}

# batched_phase N KIND: like ceiling_phase, but as the service sends operations:
# SCRIPT_BATCH carrying BATCH_OPS of them per call (N operations in N/BATCH_OPS calls)
BATCH_OPS=8
batched_phase() {
    local n=$1 kind=$2 p t0 t1 pids=() i=0 shas=() args=() k
    for p in "${REDIS_PORTS[@]}"; do shas+=("$(redis-cli -p "$p" script load "$BATCH_SRC")"); done
    for ((k = 0; k < BATCH_OPS; k++)); do
        if [[ $kind == acquire ]]; then
            args+=("ceil:__rand_int__" "ceil:#fence:__rand_int__")
        else
            args+=("ceil:__rand_int__")
        fi
    done
    for ((k = 0; k < BATCH_OPS; k++)); do
        if [[ $kind == acquire ]]; then args+=(a "$CEIL_LEASE" 30000); else args+=(r "$CEIL_LEASE" "ceil:#chan:x" bench); fi
    done
    local nk=$BATCH_OPS
    [[ $kind == acquire ]] && nk=$((2 * BATCH_OPS))
    t0=$(date +%s%N)
    for p in "${REDIS_PORTS[@]}"; do
        timeout 120 redis-benchmark -p "$p" --dbnum 1 -c "$REDIS_CLIENTS" -P 4 -n "$((n / BATCH_OPS))" -r "$n" --csv \
            evalsha "${shas[$i]}" "$nk" "${args[@]}" >"$TMP/rbb-$kind-$i.csv" 2>&1 &
        pids+=($!)
        i=$((i + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || die "redis-benchmark (batched) failed: $(cat "$TMP"/rbb-"$kind"-*.csv)"; done
    t1=$(date +%s%N)
    PHASE_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}

# ceiling_batched N: sets CEIL_OUT to "cycles/s redis-us-per-cycle" with batched calls
ceiling_batched() {
    local n=$1 ta tr c0 c1 p
    c0=$(cpu_ticks "${REDIS_PIDS[@]}")
    batched_phase "$n" acquire
    ta=$PHASE_SECS
    batched_phase "$n" release
    tr=$PHASE_SECS
    c1=$(cpu_ticks "${REDIS_PIDS[@]}")
    for p in "${REDIS_PORTS[@]}"; do redis-cli -p "$p" -n 1 flushdb >/dev/null; done
    CEIL_OUT=$(awk -v n="$n" -v a="$ta" -v r="$tr" -v c0="$c0" -v c1="$c1" -v hz="$HZ" \
        'BEGIN { printf "%.0f %.1f", n / (a + r), (c1 - c0) / hz * 1e6 / n }')
}

# ceiling N PIPELINE: sets CEIL_OUT to "cycles/s acquires/s releases/s
# acquire-success-% release-hit-%" for acquire then release on every master
CEIL_OUT=
ceiling() {
    local n=$1 pipe=$2 ta tr p k0 k1 k2 c0 c1
    k0=$(expires_db1 "${REDIS_PORTS[@]}")
    c0=$(cpu_ticks "${REDIS_PIDS[@]}")
    ceiling_phase "$n" "$pipe" acquire
    ta=$PHASE_SECS
    k1=$(expires_db1 "${REDIS_PORTS[@]}")
    ceiling_phase "$n" "$pipe" release
    tr=$PHASE_SECS
    k2=$(expires_db1 "${REDIS_PORTS[@]}")
    c1=$(cpu_ticks "${REDIS_PIDS[@]}")
    # the ceiling works in db 1: the service's keys and markers in db 0 stay
    for p in "${REDIS_PORTS[@]}"; do redis-cli -p "$p" -n 1 flushdb >/dev/null; done
    # last field: Redis CPU (all masters) per cycle, in microseconds
    CEIL_OUT=$(awk -v n="$n" -v a="$ta" -v r="$tr" -v k0="$k0" -v k1="$k1" -v k2="$k2" -v m="$NMASTERS" \
        -v c0="$c0" -v c1="$c1" -v hz="$HZ" \
        'BEGIN { printf "%.0f %.0f %.0f %.0f %.0f %.1f", n / (a + r), n / a, n / r, 100 * (k1 - k0) / (n * m),
                 100 * (k1 - k2) / (n * m), (c1 - c0) / hz * 1e6 / n }')
}

CEIL_RUNS_P=()
CEIL_RUNS_1=()
CEIL_US_P=()
CEIL_US_1=()
CEIL_RUNS_B=()
CEIL_US_B=()
# ceiling_run RUN: one measurement of both ceilings, right after that run's
# loadgen points so that service and ceiling see the same machine load
ceiling_run() {
    local c1 a1 r1 c2
    local ok hit
    if [[ -z $ACQ_SRC ]]; then
        scripts_source
        check_scripts
        echo "bench: raw-Redis ceiling: redis-benchmark on all $NMASTERS masters at once, EVALSHA of the scripts from $SCRIPTS_FROM"
    fi
    local u1 u2
    ceiling "$REDIS_N" "$REDIS_PIPE"
    read -r c1 a1 r1 ok hit u1 <<<"$CEIL_OUT"
    ceiling "$((REDIS_N / 5))" 1
    read -r c2 _ _ _ _ u2 <<<"$CEIL_OUT"
    local c3=0 u3=0
    if [[ -n $BATCH_SRC ]]; then
        ceiling_batched "$REDIS_N"
        read -r c3 u3 <<<"$CEIL_OUT"
    fi
    CEIL_RUNS_B+=("$c3")
    CEIL_US_B+=("$u3")
    echo "  run $1 ceiling: pipelined (-P $REDIS_PIPE -c $REDIS_CLIENTS) $c1 cycles/s, Redis CPU $u1 us/cycle (acquire $a1/s, release $r1/s per master; $ok% of acquires free, $hit% of releases found their key); one command per write (-P 1) $c2 cycles/s, $u2 us/cycle; batched $BATCH_OPS operations per call, as the service sends them, $c3 cycles/s, $u3 us/cycle  load $(cut -d' ' -f1-3 /proc/loadavg)"
    CEIL_RUNS_P+=("$c1")
    CEIL_RUNS_1+=("$c2")
    CEIL_US_P+=("$u1")
    CEIL_US_1+=("$u2")
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$c1" "$c2" "$u1" "$u2" >>"$OUT/ceiling-runs.tsv"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

ceiling_summary() {
    CEIL_P=$(median "${CEIL_RUNS_P[@]}")
    CEIL_1=$(median "${CEIL_RUNS_1[@]}")
    CEIL_UP=$(median "${CEIL_US_P[@]}")
    CEIL_U1=$(median "${CEIL_US_1[@]}")
    CEIL_B=$(median "${CEIL_RUNS_B[@]}")
    CEIL_UB=$(median "${CEIL_US_B[@]}")
    # what Redis alone could do with every core of the machine, at the pipelined cost
    CEIL_CPU=$(awk -v u="$CEIL_UP" -v c="$(nproc)" 'BEGIN { if (u > 0) printf "%.0f", c * 1e6 / u; else print 0 }')
    printf 'pipelined\t%s\nunpipelined\t%s\nbatched\t%s\nredis_us_per_cycle_pipelined\t%s\nredis_us_per_cycle_unpipelined\t%s\nredis_us_per_cycle_batched\t%s\ncpu_bound\t%s\nscripts\t%s\n' \
        "$CEIL_P" "$CEIL_1" "$CEIL_B" "$CEIL_UP" "$CEIL_U1" "$CEIL_UB" "$CEIL_CPU" "$SCRIPTS_FROM" >"$OUT/ceiling.tsv"
}

# ---------------------------------------------------------------- service
bench_service() {
    local c run
    start_masters
    start_service
    add_target redlockd "$SVC_PORT" "$SVC_PID" "$TMP/redlockd.log"
    if [[ -x $FLOOR && -n $FLOOR_CONNS ]]; then
        local fp
        fp=$(free_port)
        "$FLOOR" "$fp" >"$TMP/httpfloor.log" 2>&1 &
        PIDS+=($!)
        add_target http-floor "$fp" "$!" "$TMP/httpfloor.log"
        wait_port "$fp" 5 || die "httpfloor did not start"
    fi
    header "service pid $SVC_PID on 127.0.0.1:$SVC_PORT, masters $MASTERS"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    for c in $CONNS; do POINTS+=("redlockd|cycle|$c|"); done
    local hot="hot$$x$RANDOM"
    POINTS+=("redlockd|contention|$HOT_CONNS|-m contention --name ${hot}c --ttl-ms 10000")
    POINTS+=("redlockd|handoff|$HOT_CONNS|-m handoff --name ${hot}h --ttl-ms 10000 --wait-ms 5000")
    if [[ $ACQ_ONLY == 1 ]]; then
        POINTS+=("redlockd|acquire-only|$HOT_CONNS|-m acquire-only --ttl-ms 2000 --prefix ao")
    fi
    if [[ -n ${TARGET_PORT[http-floor]:-} ]]; then
        for c in $FLOOR_CONNS; do POINTS+=("http-floor|cycle|$c|"); done
    fi
    # contention/handoff names differ per run: a grant lost with a dropped
    # connection would otherwise block the next run until its TTL
    local spec
    run_all_points_hot() {
        local r s
        for ((r = 1; r <= RUNS; r++)); do
            echo "bench: run $r of $RUNS (load $(cut -d' ' -f1-3 /proc/loadavg))"
            for s in "${POINTS[@]}"; do
                run_point "$r" "${s//$hot/$hot$r}"
            done
            ceiling_run "$r"
        done
    }
    run_all_points_hot
    ceiling_summary
    load_line
    summarize
    report_service | tee "$OUT/report.txt"
    markdown_service >"$OUT/report.md"
}

# redis_us TARGET POINT CONNS: Redis CPU (all masters) per cycle at that point
redis_us() {
    awk -v r="$(col redis_cpu "$1" "$2" "$3")" -v y="$(col cycles_per_s "$1" "$2" "$3")" \
        'BEGIN { if (y > 0) printf "%.1f", r * 1e6 / y; else printf "-" }'
}

# same_run_ratios CONNS: service cycles/s over the ceiling of the same run
same_run_ratios() {
    local r v c out=""
    while IFS=$'\t' read -r r c _; do
        v=$(jq -r .cycles_per_s "$OUT/raw/redlockd-cycle-c$1-run$r.json" 2>/dev/null || echo "")
        out+="${out:+, }$(ratio "$v" "$c")"
    done <"$OUT/ceiling-runs.tsv"
    echo "$out"
}

report_service() {
    local c v
    echo
    echo "== redlockd, $NMASTERS masters, median of $RUNS run(s) of ${SECS}s (+${WARM}s warm-up), $(cat "$OUT/load.txt")"
    printf '%-14s %6s %10s %9s %9s %9s %9s %8s %8s %8s  %s\n' point conns "cycles/s" "acq_p50" "acq_p99" "acq_p999" "rel_p99" "svc_cpu" "redis" "errors" "vs ceiling"
    for c in $CONNS; do
        v=$(col cycles_per_s redlockd cycle "$c")
        printf '%-14s %6s %10s %9s %9s %9s %9s %8s %8s %8s  %s\n' cycle "$c" "$v" \
            "$(col acq_p50_ms redlockd cycle "$c")" "$(col acq_p99_ms redlockd cycle "$c")" \
            "$(col acq_p999_ms redlockd cycle "$c")" "$(col rel_p99_ms redlockd cycle "$c")" \
            "$(col target_cpu redlockd cycle "$c")" "$(col redis_cpu redlockd cycle "$c")" \
            "$(col errors redlockd cycle "$c")" "$(ratio "$v" "$CEIL_P")"
    done
    echo
    c=$HOT_CONNS
    echo "contention  c=$c: 409/s $(col conflicts_per_s redlockd contention "$c") (409 p99 $(col conflict_p99_ms redlockd contention "$c") ms), grants/s $(col grants_per_s redlockd contention "$c"), errors $(col errors redlockd contention "$c"), redis cpu $(col redis_cpu redlockd contention "$c") cores"
    echo "redis CPU per answered acquire under contention (409 or 201): $(awk -v r="$(col redis_cpu redlockd contention "$c")" -v a="$(col conflicts_per_s redlockd contention "$c")" -v g="$(col grants_per_s redlockd contention "$c")" 'BEGIN { if (a + g > 0) printf "%.1f", r * 1e6 / (a + g); else printf "-" }') us; per cycle at c=$c (grant + release): $(awk -v r="$(col redis_cpu redlockd cycle "$c")" -v y="$(col cycles_per_s redlockd cycle "$c")" 'BEGIN { if (y > 0) printf "%.1f", r * 1e6 / y; else printf "-" }') us (all $NMASTERS masters together)"
    echo "handoff     c=$c: grants/s $(col grants_per_s redlockd handoff "$c"), release->next grant p50 $(col gap_p50_ms redlockd handoff "$c") ms p99 $(col gap_p99_ms redlockd handoff "$c") ms, errors $(col errors redlockd handoff "$c")"
    echo "safety (one name, all runs): contention $(col safety redlockd contention "$c"); handoff $(col safety redlockd handoff "$c")"
    if [[ $ACQ_ONLY == 1 ]]; then
        echo "acquire-only c=$c: grants/s $(col grants_per_s redlockd acquire-only "$c"), acq p50/p99 $(col acq_p50_ms redlockd acquire-only "$c")/$(col acq_p99_ms redlockd acquire-only "$c") ms, errors $(col errors redlockd acquire-only "$c")"
    fi
    if [[ -n ${TARGET_PORT[http-floor]:-} ]]; then
        for v in $FLOOR_CONNS; do
            echo "http floor (fixed JSON, no Redis) c=$v: $(col cycles_per_s http-floor cycle "$v") cycles/s, acq p50/p99 $(col acq_p50_ms http-floor cycle "$v")/$(col acq_p99_ms http-floor cycle "$v") ms, loadgen cpu $(col loadgen_cpu http-floor cycle "$v") cores"
        done
    fi
    echo "raw-Redis ceiling ($SCRIPTS_FROM): pipelined $CEIL_P cycles/s, one command per write $CEIL_1 cycles/s, batched $BATCH_OPS per call $CEIL_B cycles/s (Redis CPU per cycle: $CEIL_UP / $CEIL_U1 / $CEIL_UB us)"
    echo "Redis CPU per cycle (5 masters): pipelined ceiling $CEIL_UP us, one command per write $CEIL_U1 us, redlockd at c=$c $(redis_us redlockd cycle "$c") us; all $(nproc) cores for Redis at the pipelined cost: $CEIL_CPU cycles/s"
    echo "redlockd c=$c / pipelined ceiling: $(ratio "$(col cycles_per_s redlockd cycle "$c")" "$CEIL_P") (medians); run by run: $(same_run_ratios "$c")"
    local det
    det=$(awk -F'\t' 'NR > 1 && $NF != "" && $1 == "redlockd" { printf "  %s c=%s: %s\n", $2, $3, $NF }' "$OUT/summary.tsv")
    if [[ -n $det ]]; then printf 'errors by kind (all runs):\n%s\n' "$det"; fi
    echo "raw results: $OUT"
}

# ---------------------------------------------------------------- peers
bench_peers() {
    local c
    start_masters
    start_service
    add_target redlockd "$SVC_PORT" "$SVC_PID" "$TMP/redlockd.log"

    if command -v node >/dev/null 2>&1; then
        if [[ ! -d $PEERS_DIR/node_modules/redlock || ! -d $PEERS_DIR/node_modules/ioredis ]]; then
            note "installing node peers (npm ci in $PEERS_DIR)"
            (cd "$PEERS_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || note "npm ci failed: node peers skipped"
        fi
        if [[ -d $PEERS_DIR/node_modules/redlock ]]; then
            local np w
            for w in 1 2; do
                np=$(free_port)
                node "$PEERS_DIR/server.js" --masters "$MASTERS" --listen "127.0.0.1:$np" --workers "$w" \
                    >"$TMP/node-$w.log" 2>&1 &
                PIDS+=($!)
                if wait_http "$np" /healthz 15; then
                    add_target "node-redlock-${w}p" "$np" "$!" "$TMP/node-$w.log"
                else
                    note "node peer ($w process) did not start: $(tail -3 "$TMP/node-$w.log")"
                fi
            done
        fi
    else
        note "node not found: node-redlock peers skipped"
    fi

    if command -v etcd >/dev/null 2>&1; then
        local ep epp
        ep=$(free_port)
        epp=$(free_port)
        etcd --name bench --data-dir "$TMP/etcd" \
            --listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
            --listen-peer-urls "http://127.0.0.1:$epp" --initial-advertise-peer-urls "http://127.0.0.1:$epp" \
            --initial-cluster "bench=http://127.0.0.1:$epp" --logger zap --log-level error \
            >"$TMP/etcd.log" 2>&1 &
        PIDS+=($!)
        if wait_http "$ep" /health 15; then
            add_target etcd "$ep" "$!" "$TMP/etcd.log" "--proto etcd"
        else
            note "etcd did not start: $(tail -3 "$TMP/etcd.log")"
        fi
    else
        note "etcd not installed (Debian: apt-get install etcd-server): etcd skipped"
    fi

    header "targets: ${TARGET_ORDER[*]}; node $(node --version 2>/dev/null || echo -), redlock $(jq -r .version "$PEERS_DIR/node_modules/redlock/package.json" 2>/dev/null || echo -), ioredis $(jq -r .version "$PEERS_DIR/node_modules/ioredis/package.json" 2>/dev/null || echo -), etcd $(etcd --version 2>/dev/null | awk 'NR == 1 { print $3 }' || echo -)"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    local t
    for c in $CONNS; do
        for t in "${TARGET_ORDER[@]}"; do POINTS+=("$t|cycle|$c|"); done
    done
    run_all_points
    load_line
    summarize
    report_peers | tee "$OUT/report.txt"
    markdown_peers >"$OUT/report.md"
}

report_peers() {
    local c t v s line
    echo
    echo "== cycles/s (POST + DELETE, random names), median of $RUNS run(s) of ${SECS}s (+${WARM}s warm-up), $(cat "$OUT/load.txt")"
    line=$(printf '%6s' conns)
    for t in "${TARGET_ORDER[@]}"; do line+=$(printf ' %16s' "$t"); done
    for t in "${TARGET_ORDER[@]:1}"; do line+=$(printf ' %18s' "redlockd/$t"); done
    echo "$line"
    for c in $CONNS; do
        line=$(printf '%6s' "$c")
        for t in "${TARGET_ORDER[@]}"; do line+=$(printf ' %16s' "$(col cycles_per_s "$t" cycle "$c")"); done
        s=$(col cycles_per_s redlockd cycle "$c")
        for t in "${TARGET_ORDER[@]:1}"; do line+=$(printf ' %18s' "$(ratio "$s" "$(col cycles_per_s "$t" cycle "$c")")"); done
        echo "$line"
    done
    echo
    echo "== acquire latency p50 / p99 / p999 ms"
    line=$(printf '%6s' conns)
    for t in "${TARGET_ORDER[@]}"; do line+=$(printf ' %24s' "$t"); done
    echo "$line"
    for c in $CONNS; do
        line=$(printf '%6s' "$c")
        for t in "${TARGET_ORDER[@]}"; do
            line+=$(printf ' %24s' "$(col acq_p50_ms "$t" cycle "$c") / $(col acq_p99_ms "$t" cycle "$c") / $(col acq_p999_ms "$t" cycle "$c")")
        done
        echo "$line"
    done
    echo
    echo "== errors (all runs) and CPU (cores: target / redis / loadgen)"
    for c in $CONNS; do
        line=$(printf '%6s' "$c")
        for t in "${TARGET_ORDER[@]}"; do
            line+=$(printf ' %24s' "$(col errors "$t" cycle "$c") err, $(col target_cpu "$t" cycle "$c")/$(col redis_cpu "$t" cycle "$c")/$(col loadgen_cpu "$t" cycle "$c")")
        done
        echo "$line"
    done
    local det
    det=$(awk -F'\t' 'NR > 1 && $NF != "" { printf "  %s c=%s: %s\n", $1, $3, $NF }' "$OUT/summary.tsv")
    if [[ -n $det ]]; then printf 'errors by kind (all runs):\n%s\n' "$det"; fi
    echo "raw results: $OUT"
}

# ---------------------------------------------------------------- markdown
# report.md: the same figures as tables for BENCHMARKS.md

markdown_service() {
    local c v
    echo "redlockd, $NMASTERS local masters, median of $RUNS run(s) of ${SECS} s (+${WARM} s warm-up); $(cat "$OUT/load.txt")"
    echo
    echo "| point | conns | cycles/s | acquire p50 / p99 / p999 ms | release p99 ms | service / Redis CPU (cores) | errors (all runs) | / ceiling |"
    echo "|---|---|---|---|---|---|---|---|"
    for c in $CONNS; do
        v=$(col cycles_per_s redlockd cycle "$c")
        echo "| cycle | $c | $v | $(col acq_p50_ms redlockd cycle "$c") / $(col acq_p99_ms redlockd cycle "$c") / $(col acq_p999_ms redlockd cycle "$c") | $(col rel_p99_ms redlockd cycle "$c") | $(col target_cpu redlockd cycle "$c") / $(col redis_cpu redlockd cycle "$c") | $(col errors redlockd cycle "$c") $(col error_detail redlockd cycle "$c") | $(ratio "$v" "$CEIL_P") |"
    done
    c=$HOT_CONNS
    echo "| contention (409/s) | $c | $(col conflicts_per_s redlockd contention "$c") | 409: p99 $(col conflict_p99_ms redlockd contention "$c"); grants/s $(col grants_per_s redlockd contention "$c") | $(col rel_p99_ms redlockd contention "$c") | $(col target_cpu redlockd contention "$c") / $(col redis_cpu redlockd contention "$c") | $(col errors redlockd contention "$c") $(col error_detail redlockd contention "$c") | |"
    echo "| handoff (grants/s) | $c | $(col grants_per_s redlockd handoff "$c") | gap release→grant p50 $(col gap_p50_ms redlockd handoff "$c") / p99 $(col gap_p99_ms redlockd handoff "$c"); 409/s $(col conflicts_per_s redlockd handoff "$c") | $(col rel_p99_ms redlockd handoff "$c") | $(col target_cpu redlockd handoff "$c") / $(col redis_cpu redlockd handoff "$c") | $(col errors redlockd handoff "$c") $(col error_detail redlockd handoff "$c") | |"
    for v in $FLOOR_CONNS; do
        echo "| HTTP floor (no Redis) | $v | $(col cycles_per_s http-floor cycle "$v") | $(col acq_p50_ms http-floor cycle "$v") / $(col acq_p99_ms http-floor cycle "$v") / $(col acq_p999_ms http-floor cycle "$v") | $(col rel_p99_ms http-floor cycle "$v") | $(col target_cpu http-floor cycle "$v") / - | $(col errors http-floor cycle "$v") | |"
    done
    echo
    echo "Safety checks on the one-name points (all runs): contention $(col safety redlockd contention "$c"); handoff $(col safety redlockd handoff "$c")."
    echo
    echo "Raw-Redis ceiling (redis-benchmark, EVALSHA of the scripts from $SCRIPTS_FROM, all masters at once): pipelined $CEIL_P cycles/s, one command per write $CEIL_1 cycles/s, batched $BATCH_OPS operations per call (as the service sends them) $CEIL_B cycles/s. Redis CPU per cycle (all masters): pipelined ceiling $CEIL_UP us, one command per write $CEIL_U1 us, batched $CEIL_UB us, redlockd at c=$HOT_CONNS $(redis_us redlockd cycle "$HOT_CONNS") us; with all $(nproc) cores, Redis at the pipelined cost would do $CEIL_CPU cycles/s. Run by run (ceiling, redlockd c=$HOT_CONNS / ceiling): $(awk -F'\t' '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }' "$OUT/ceiling-runs.tsv"); $(same_run_ratios "$HOT_CONNS")."
}

markdown_peers() {
    local c t s line
    echo "cycles/s, median of $RUNS run(s) of ${SECS} s (+${WARM} s warm-up); $(cat "$OUT/load.txt")"
    echo
    line="| conns |"
    for t in "${TARGET_ORDER[@]}"; do line+=" $t |"; done
    for t in "${TARGET_ORDER[@]:1}"; do line+=" redlockd / $t |"; done
    echo "$line"
    # shellcheck disable=SC2001
    echo "$line" | sed 's/[^|]\+/---/g'
    for c in $CONNS; do
        line="| $c |"
        s=$(col cycles_per_s redlockd cycle "$c")
        for t in "${TARGET_ORDER[@]}"; do line+=" $(col cycles_per_s "$t" cycle "$c") |"; done
        for t in "${TARGET_ORDER[@]:1}"; do line+=" $(ratio "$s" "$(col cycles_per_s "$t" cycle "$c")") |"; done
        echo "$line"
    done
    echo
    echo "acquire p50 / p99 / p999 ms"
    echo
    line="| conns |"
    for t in "${TARGET_ORDER[@]}"; do line+=" $t |"; done
    echo "$line"
    # shellcheck disable=SC2001
    echo "$line" | sed 's/[^|]\+/---/g'
    for c in $CONNS; do
        line="| $c |"
        for t in "${TARGET_ORDER[@]}"; do
            line+=" $(col acq_p50_ms "$t" cycle "$c") / $(col acq_p99_ms "$t" cycle "$c") / $(col acq_p999_ms "$t" cycle "$c") |"
        done
        echo "$line"
    done
    echo
    echo "errors over all runs"
    echo
    for c in $CONNS; do
        for t in "${TARGET_ORDER[@]}"; do
            s=$(col error_detail "$t" cycle "$c")
            if [[ -n $s ]]; then echo "- $t c=$c: $s"; fi
        done
    done
}

# ---------------------------------------------------------------- waiters
# BENCH_WAITERS connections park on one held name (wait_ms long); the
# service's RSS and CPU are sampled while they wait, then the lock is
# released and the waiters are served one after another.
bench_waiters() {
    local n=${BENCH_WAITERS:-10000} lease t0 t1 r0 r1 r2 lg name
    SVC_ARGS="--max-connections $((n + 1000)) --max-waiters $((n + 1000)) $SVC_ARGS"
    start_masters
    start_service
    header "waiters: $n parked on one name; service pid $SVC_PID"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    name="park$$x$RANDOM"
    r0=$(rss_kib "$SVC_PID")
    lease=$(curl -s -X POST "http://127.0.0.1:$SVC_PORT/locks/$name?ttl_ms=60000" | jq -r .lease)
    [[ -n $lease && $lease != null ]] || die "could not take the lock to park on"
    "$LOADGEN" -p "$SVC_PORT" -m handoff -c "$n" --name "$name" --wait-ms 50000 --ttl-ms 60000 \
        --timeout-ms 58000 -d 12 -w 0 --drain-ms 40000 --json --label waiters >"$OUT/waiters.json" &
    lg=$!
    PIDS+=("$lg")
    sleep 4 # connections open and park
    r1=$(rss_kib "$SVC_PID")
    t0=$(cpu_ticks "$SVC_PID")
    sleep 4
    t1=$(cpu_ticks "$SVC_PID")
    r2=$(rss_kib "$SVC_PID")
    curl -s -X DELETE "http://127.0.0.1:$SVC_PORT/locks/$name?lease=$lease" >/dev/null
    wait "$lg" || true
    load_line >/dev/null
    {
        echo "waiters: $n parked on one name (wait_ms=50000)"
        echo "service RSS: idle $((r0 / 1024)) MiB, parked $((r1 / 1024)) MiB (+$(((r1 - r0) / 1024)) MiB), 4 s later $((r2 / 1024)) MiB"
        echo "service CPU while parked: $(awk -v a="$t0" -v b="$t1" -v hz="$HZ" 'BEGIN { printf "%.3f", (b - a) / hz / 4 }') cores"
        # the release comes 8 s into the 12 s window: grants are counted over ~4 s
        jq -r '"after the release: \(.acquire.count) grants in the last ~4 s of the window (~\(.acquire.count / 4 | floor)/s), release->next grant p50/p99 \(.gap.p50_ms)/\(.gap.p99_ms) ms, errors \(.errors.total) \(.errors.codes) timeouts \(.errors.timeout) conn \(.errors.conn) connect \(.errors.connect)"' "$OUT/waiters.json"
        cat "$OUT/load.txt"
    } | tee "$OUT/report.txt"
}

# soak: c=BENCH_HOT_CONNS cycles for BENCH_SOAK_SECONDS (600), the service's RSS
# sampled every 10 s; after the first minute (pools and buffers reach their size)
# every sample must stay within +/-5 % of the median.
bench_soak() {
    local secs=${BENCH_SOAK_SECONDS:-600} lg t=0 r ok
    start_masters
    start_service
    header "soak: c=$HOT_CONNS cycles for $secs s; service pid $SVC_PID"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    "$LOADGEN" -p "$SVC_PORT" -m cycle -c "$HOT_CONNS" -d "$secs" -w 0 --json --label soak >"$OUT/soak.json" &
    lg=$!
    PIDS+=("$lg")
    printf 's\trss_kib\n' >"$OUT/rss.tsv"
    while kill -0 "$lg" 2>/dev/null && ((t <= secs)); do
        printf '%s\t%s\n' "$t" "$(rss_kib "$SVC_PID")" >>"$OUT/rss.tsv"
        sleep 10
        t=$((t + 10))
    done
    wait "$lg" || die "the load generator failed: $(head -c 400 "$OUT/soak.json")"
    load_line >/dev/null
    r=$(awk -F'\t' 'NR > 1 && $1 >= 60 { v[++n] = $2 } END {
            if (n == 0) { print "no samples"; exit }
            m = n; for (i = 1; i <= n; i++) s[i] = v[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { x = s[i]; s[i] = s[j]; s[j] = x }
            med = s[int((n + 1) / 2)]; lo = s[1]; hi = s[n]
            printf "%d samples after 60 s: median %.1f MiB, min %.1f (%+.1f %%), max %.1f (%+.1f %%)", n, med / 1024, lo / 1024, 100 * (lo - med) / med, hi / 1024, 100 * (hi - med) / med
            if (100 * (hi - med) / med > 5 || 100 * (med - lo) / med > 5) print " -> NOT flat"; else print " -> flat within 5 %"
        }' "$OUT/rss.tsv")
    {
        echo "soak: c=$HOT_CONNS, $secs s"
        jq -r '"cycles/s \(.cycles_per_s), acquire p50/p99 \(.acquire.p50_ms)/\(.acquire.p99_ms) ms, errors \(.errors.total)"' "$OUT/soak.json"
        echo "service RSS: $r"
        echo "first/last sample: $(awk -F'\t' 'NR == 2 { a = $2 } END { printf "%.1f / %.1f MiB", a / 1024, $2 / 1024 }' "$OUT/rss.tsv")"
        cat "$OUT/load.txt"
    } | tee "$OUT/report.txt"
}

case $WHAT in
service) bench_service ;;
peers) bench_peers ;;
waiters)
    bench_waiters
    exit 0
    ;;
soak)
    bench_soak
    exit 0
    ;;
esac
plot "$OUT" || note "plot failed"
