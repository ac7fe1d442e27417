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
#   bench.sh compare   two service builds side by side: the baseline
#                      (BENCH_BASELINE=<binary>, or BENCH_BASELINE_REF built
#                      from git, default HEAD~1) and $REDLOCKD, run by run
#                      alternately, each target run on fresh redis-servers;
#                      medians and the new/base ratio of every figure
#                      (BENCH_COMPARE_TLS=1: $REDLOCKD alone, its masters over
#                      TCP as base and over TLS as new)
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
# BENCH_BASELINE=<binary> make bench: the side-by-side comparison instead
if [[ $WHAT == service && -n ${BENCH_BASELINE:-} ]]; then WHAT=compare; fi
[[ $WHAT == service || $WHAT == peers || $WHAT == waiters || $WHAT == soak || $WHAT == compare || $WHAT == park ]] ||
    die "usage: bench.sh service|peers|waiters|soak|compare|park|plot|publish"

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
# MASTERS_TLS=1: the masters also serve TLS (--tls-port, tls-auth-clients yes, with a
# CA, a server and a client certificate made here by openssl) and the service is
# given their TLS ports (rediss://); the plain port stays for redis-cli's questions.
MASTERS_TLS=0
SVC_TLS_ARGS=
tls_certs() {
    local d=$TMP/tls
    [[ -f $d/client.pem ]] && return 0
    need openssl openssl
    mkdir -p "$d"
    (
        cd "$d"
        openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem
        openssl req -x509 -new -key ca-key.pem -days 2 -subj /CN=bench-ca -out ca.pem
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        for n in server client; do
            openssl ecparam -name prime256v1 -genkey -noout -out $n-key.pem
            openssl req -new -key $n-key.pem -subj /CN=bench-$n -out $n.csr
            openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile $n.ext -out $n.pem
        done
    ) >"$TMP/openssl.log" 2>&1 || die "openssl could not make the test certificates (see $TMP/openssl.log)"
}

REDIS_PORTS=()
REDIS_PIDS=()
start_masters() {
    local i p pid try tp tls_args=() list=()
    if [[ $MASTERS_TLS == 1 ]]; then
        tls_certs
        SVC_TLS_ARGS="--redis-tls-ca-file $TMP/tls/ca.pem --redis-tls-cert $TMP/tls/client.pem --redis-tls-key $TMP/tls/client-key.pem"
    else
        SVC_TLS_ARGS=
    fi
    for ((i = 0; i < NMASTERS; i++)); do
        for ((try = 0; try < 5; try++)); do
            p=$(free_port)
            tls_args=()
            if [[ $MASTERS_TLS == 1 ]]; then
                tp=$(free_port)
                tls_args=(--tls-port "$tp" --tls-cert-file "$TMP/tls/server.pem" --tls-key-file "$TMP/tls/server-key.pem"
                    --tls-ca-cert-file "$TMP/tls/ca.pem" --tls-auth-clients yes)
            fi
            mkdir -p "$TMP/redis-$p"
            redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
                --dir "$TMP/redis-$p" --logfile "$TMP/redis-$p.log" --daemonize no "${tls_args[@]}" &
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
        if [[ $MASTERS_TLS == 1 ]]; then list+=("rediss://127.0.0.1:$tp"); else list+=("127.0.0.1:$p"); fi
    done
    MASTERS=$(printf '%s,' "${list[@]}")
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
SVC_LOG=
# start_service [BINARY [LOG]]: redlockd (default $REDLOCKD) on the current masters
start_service() {
    local bin=${1:-$REDLOCKD}
    SVC_LOG=${2:-$TMP/redlockd.log}
    SVC_PORT=$(free_port)
    # shellcheck disable=SC2086
    "$bin" --masters "$MASTERS" --listen "127.0.0.1:$SVC_PORT" $SVC_ARGS $SVC_TLS_ARGS >"$SVC_LOG" 2>&1 &
    SVC_PID=$!
    PIDS+=("$SVC_PID")
    if ! wait_http "$SVC_PORT" /readyz 15; then
        tail -20 "$SVC_LOG" >&2
        die "$bin did not become ready on 127.0.0.1:$SVC_PORT"
    fi
}

# stop_pids PID...: stop these processes (ours, by PID) and forget them
stop_pids() {
    local p q keep=()
    for p in "$@"; do kill "$p" 2>/dev/null || true; done
    for p in "$@"; do wait "$p" 2>/dev/null || true; done
    for q in "${PIDS[@]}"; do
        for p in "$@"; do [[ $q == "$p" ]] && continue 2; done
        keep+=("$q")
    done
    PIDS=("${keep[@]}")
}

# stop_masters: the redis-servers start_masters started (their data goes with them)
stop_masters() {
    stop_pids "${REDIS_PIDS[@]}"
    REDIS_PIDS=()
    REDIS_PORTS=()
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

# redis_cmdstats PORT...: INFO commandstats summed over these masters, as JSON
# {"command": [calls, usec], ...}.  Commands a script runs (redis.call) are counted
# under their own names as well as inside the EVALSHA's time.
redis_cmdstats() {
    local p
    for p in "$@"; do redis-cli -p "$p" info commandstats 2>/dev/null; done | tr -d '\r' |
        awk -F'[:,=]' '
            /^cmdstat_/ {
                n = substr($1, 9)
                for (i = 2; i < NF; i += 2) { if ($i == "calls") c[n] += $(i + 1); if ($i == "usec") u[n] += $(i + 1) }
            }
            END { printf "{"; for (n in c) printf "%s\"%s\":[%d,%d]", (k++ ? "," : ""), n, c[n], u[n]; print "}" }'
}

# run_point RUN "target|point|conns|args": one loadgen run, raw JSON kept
run_point() {
    local run=$1 spec=$2 target point conns args port f c0 c1 rc0 rc1 rss load rs0 rs1
    IFS='|' read -r target point conns args <<<"$spec"
    port=${TARGET_PORT[$target]}
    f="$OUT/raw/$target-$point-c$conns-run$run.json"
    mkdir -p "$OUT/raw"
    # shellcheck disable=SC2086
    set -- ${TARGET_PIDS[$target]}
    c0=$(cpu_ticks "$@")
    rc0=$(cpu_ticks "${REDIS_PIDS[@]}")
    rs0=$(redis_cmdstats "${REDIS_PORTS[@]}")
    # the window's own figures (loadgen takes them at its start and end): CPU of the
    # target and of the masters, the target's counters, the masters' commands
    local wargs=(--cpu-pids "svc=$(echo "$@" | tr ' ' ,)")
    if ((${#REDIS_PIDS[@]})); then
        wargs+=(--cpu-pids "redis=$(IFS=,; echo "${REDIS_PIDS[*]}")" --redis-ports "$(IFS=,; echo "${REDIS_PORTS[*]}")")
    fi
    [[ $target == node-* || $target == etcd ]] || wargs+=(--metrics)
    # shellcheck disable=SC2086
    if ! "$LOADGEN" -p "$port" -c "$conns" -t "$LOADGEN_THREADS" -d "$SECS" -w "$WARM" --json \
        --label "$target" "${wargs[@]}" ${TARGET_ARGS[$target]} $args >"$f.tmp" 2>"$OUT/raw/loadgen.err"; then
        note "loadgen failed for $target $point c=$conns: $(cat "$OUT/raw/loadgen.err")"
        rm -f "$f.tmp"
        return 0
    fi
    c1=$(cpu_ticks "$@")
    rc1=$(cpu_ticks "${REDIS_PIDS[@]}")
    rs1=$(redis_cmdstats "${REDIS_PORTS[@]}")
    rss=0
    for p in "$@"; do rss=$((rss + $(rss_kib "$p"))); done
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    # CPU is over the whole run (warm-up included), in cores
    jq -c --argjson svc "$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v s="$SECS" -v w="$WARM" 'BEGIN { printf "%.3f", (b - a) / hz / (s + w) }')" \
        --argjson redis "$(awk -v a="$rc0" -v b="$rc1" -v hz="$HZ" -v s="$SECS" -v w="$WARM" 'BEGIN { printf "%.3f", (b - a) / hz / (s + w) }')" \
        --argjson rss "$rss" --arg load "$load" --arg point "$point" --arg run "$run" \
        --argjson rs0 "$rs0" --argjson rs1 "$rs1" --arg unit "${POINT_UNIT[$point]:-cycle}" \
        '. + {target_cpu_cores: $svc, redis_cpu_cores: $redis, target_rss_kib: $rss, loadavg: $load, point: $point, run: ($run|tonumber),
              cmd_secs: (.duration_s + .warmup_s), unit: $unit}
         # the window (measured seconds only) when loadgen took it: CPU and commands of those seconds
         | if (.window.secs // 0) > 0 then
             . + {target_cpu_cores: ((.window.cpu_s.svc // ($svc * (.duration_s + .warmup_s))) / .window.secs),
                  redis_cpu_cores: ((.window.cpu_s.redis // ($redis * (.duration_s + .warmup_s))) / .window.secs)}
           else . end
         | if (.window.redis_commands // null) != null then
             .window.redis_commands as $d
             | . + {cmd_secs: .window.secs, redis_commands: $d,
                    redis_cmdstats: {
                      script_usec: ([$d | to_entries[] | select(.key | startswith("eval")) | .value[1]] | add // 0),
                      script_calls: ([$d | to_entries[] | select(.key | startswith("eval")) | .value[0]] | add // 0),
                      inner_calls: ([$d | to_entries[] | select(.key | test("^(eval|info|script|ping|hello|select|auth|client|subscribe|psubscribe|unsubscribe|punsubscribe|dbsize|flushdb|flushall|config|command)($|[|])") | not) | .value[0]] | add // 0)}}
           elif ($rs1 | length) > 0 then
             # the commands the masters ran during the run (warm-up included): [calls, usec]
             ($rs1 | with_entries(.value = [.value[0] - ($rs0[.key][0] // 0), .value[1] - ($rs0[.key][1] // 0)])
                   | with_entries(select(.value[0] > 0))) as $d
             | . + {redis_commands: $d,
                    redis_cmdstats: {
                      script_usec: ([$d | to_entries[] | select(.key | startswith("eval")) | .value[1]] | add // 0),
                      script_calls: ([$d | to_entries[] | select(.key | startswith("eval")) | .value[0]] | add // 0),
                      # what scripts ran: everything but the scripts themselves and housekeeping
                      inner_calls: ([$d | to_entries[] | select(.key | test("^(eval|info|script|ping|hello|select|auth|client|subscribe|psubscribe|unsubscribe|punsubscribe|dbsize|flushdb|flushall|config|command)($|[|])") | not) | .value[0]] | add // 0)}}
           else . end' \
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
        scripts_shape
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
    scripts_shape
}

# The shapes the lock scripts have had.  Each is "record retention fence bucket
# announce shared window":
#   record     KEYS[1] is the master's record "<prefix>#master" (a hash that must
#              exist: the script refuses with REDLOCKD_UNMARKED otherwise)
#   retention  ARGV[1] is the counters' retention in ms, ahead of the op's own ARGV
#   fence      acquire takes a per-name fence key after the lock key
#   bucket     acquire's ARGV start with the name's counter bucket "b<k>"
#   announce   acquire's ARGV end with channel, origin (a grant is published)
#   shared     acquire takes KEYS lock, readers, writer intents and ARGV ..., intent,
#              reentrant; release KEYS lock, readers, tags (shared locks, ed2a291)
#   window     every lock script's first ARGV is its clock window "lo:hi" ("" for
#              none; taken off by PRELUDE's table.remove before the op's own ARGV)
# and what follows:
#   old                      (up to 6962230)  acquire KEYS lock, fence; ARGV lease, ttl
#   record+retention         (c9cf42e)        KEYS record, lock, fence; ARGV retention, lease, ttl
#   record+retention+bucket  (c66b46e..39ec6de) ... ARGV retention, bucket, lease, ttl
#   record+bucket            (cfade72..)      KEYS record, lock; ARGV bucket, lease, ttl
#   record+bucket+announce   (6765f10-467d1c8) ... ARGV bucket, lease, ttl, channel, origin
#   shared                   (..ed2a291)      KEYS record, lock, readers, intents; ARGV
#                                             bucket, lease, ttl, channel, origin, intent, reentrant
#   shared+window            (main after the clock watch) ARGV window, bucket, lease, ...
# release is KEYS [record,] lock[, readers, tags]; ARGV [retention | window,] lease,
# channel, origin in all; SCRIPT_BATCH takes KEYS [record,] op keys...; ARGV [retention
# | window,] code, args, ... with each op's keys and args as above.  check_scripts does
# not trust the source: it tries the shapes (the likeliest first, from the source) on
# one master and keeps the first under which acquire, a refused second acquire,
# release and the batched acquire and release all do exactly what they should to the
# lock key; none fitting stops the bench.  The window sent is one that every clock
# passes ("0:<far>"), so that the scripts read TIME as they do for the service.
declare -A CEIL_SHAPES=(
    [old]="0 0 1 0 0 0 0"
    [record+retention]="1 1 1 0 0 0 0"
    [record+retention+bucket]="1 1 1 1 0 0 0"
    [record+bucket]="1 0 0 1 0 0 0"
    [record+bucket+announce]="1 0 0 1 1 0 0"
    [shared]="1 0 0 1 1 1 0"
    [shared+window]="1 0 0 1 1 1 1"
)
CEIL_SHAPE=
CEIL_CANDIDATES=()
SH_REC=0 SH_RET=0 SH_FENCE=1 SH_BUCKET=0 SH_ANN=0 SH_SHARED=0 SH_WIN=0
CEIL_REC_KEY="ceil:#master"
CEIL_RETENTION=86400000
CEIL_TTL=30000
CEIL_WINDOW="0:99999999999999"

# scripts_shape: the order in which check_scripts tries the shapes for
# ACQ_SRC (a script that never reads a record is the old shape, most likely)
scripts_shape() {
    CEIL_SHAPE=
    if [[ $ACQ_SRC == *"table.remove(ARGV, 1)"* ]]; then
        CEIL_CANDIDATES=(shared+window shared record+bucket+announce record+bucket)
    elif [[ $ACQ_SRC == *"intent"* ]]; then
        CEIL_CANDIDATES=(shared shared+window record+bucket+announce record+bucket)
    elif [[ $ACQ_SRC == *"'+' .. origin"* ]]; then
        CEIL_CANDIDATES=(record+bucket+announce record+bucket record+retention+bucket record+retention old)
    elif [[ $ACQ_SRC == *REDLOCKD_UNMARKED* ]]; then
        CEIL_CANDIDATES=(record+bucket record+retention+bucket record+retention old)
    else
        CEIL_CANDIDATES=(old record+bucket record+retention+bucket record+retention)
    fi
}

use_shape() {
    CEIL_SHAPE=$1
    read -r SH_REC SH_RET SH_FENCE SH_BUCKET SH_ANN SH_SHARED SH_WIN <<<"${CEIL_SHAPES[$1]}"
}

# ceiling_record [PORT...]: writes the master's record the shape needs (all masters by default)
ceiling_record() {
    local p ports=("$@")
    ((SH_REC)) || return 0
    ((${#ports[@]})) || ports=("${REDIS_PORTS[@]}")
    for p in "${ports[@]}"; do
        if ((SH_RET)); then
            redis-cli -p "$p" -n 1 hset "$CEIL_REC_KEY" floor 0 base 0 >/dev/null
        else
            redis-cli -p "$p" -n 1 hset "$CEIL_REC_KEY" cluster bench run bench base 0 nb 0 >/dev/null
        fi
    done
}

# ceiling_prepare N: the record on every master before a ceiling (shapes with
# one) and, for the record+bucket shape, a counter in each of the N buckets the
# phases draw from ("b" and redis-benchmark's 12-digit __rand_int__): the
# service's names fall in SCRIPT_BUCKETS (16384) buckets, which all hold a
# counter after the first tens of thousands of grants, so the ceiling measures
# that steady state rather than every grant being its bucket's first (each
# counter starts at 1: a bucket's first grant is the one that counts it in nb,
# which a 0 would count again, and the record would then look damaged).  Done
# before the ceiling reads the masters' CPU.
ceiling_prepare() {
    local p
    ceiling_record
    ((SH_REC && SH_BUCKET && !SH_RET)) || return 0
    for p in "${REDIS_PORTS[@]}"; do
        redis-cli -p "$p" -n 1 eval "local n = tonumber(ARGV[1])
for i = 0, n - 1 do redis.call('HSET', KEYS[1], string.format('b%012d', i), 1) end
redis.call('HSET', KEYS[1], 'nb', n)" 1 "$CEIL_REC_KEY" "$1" >/dev/null
    done
}

# acq_call TOKEN BUCKET LEASE / rel_call TOKEN LEASE: set CALL to "numkeys keys... args..."
# of one acquire / release of lock key ceil:TOKEN under the current shape
CALL=()
acq_keys() { # TOKEN: an acquire's keys into K (without the record)
    K=("ceil:$1")
    if ((SH_FENCE)); then K+=("ceil:#fence:$1"); fi
    if ((SH_SHARED)); then K+=("ceil:#r:$1" "ceil:#w:$1"); fi
}
acq_args() { # BUCKET LEASE: an acquire's own arguments into A
    A=()
    if ((SH_BUCKET)); then A+=("$1"); fi
    A+=("$2" "$CEIL_TTL")
    if ((SH_ANN)); then A+=("ceil:#chan:x" bench); fi
    if ((SH_SHARED)); then A+=(0 0); fi
}
rel_keys() { # TOKEN
    K=("ceil:$1")
    if ((SH_SHARED)); then K+=("ceil:#r:$1" "ceil:#t:$1"); fi
}
lead_args() { # the arguments every call starts with into L
    L=()
    if ((SH_RET)); then L+=("$CEIL_RETENTION"); fi
    if ((SH_WIN)); then L+=("$CEIL_WINDOW"); fi
}
acq_call() {
    local keys=() K A L
    if ((SH_REC)); then keys+=("$CEIL_REC_KEY"); fi
    acq_keys "$1"
    keys+=("${K[@]}")
    lead_args
    acq_args "$2" "$3"
    CALL=("${#keys[@]}" "${keys[@]}" "${L[@]}" "${A[@]}")
}
rel_call() {
    local keys=() K L
    if ((SH_REC)); then keys+=("$CEIL_REC_KEY"); fi
    rel_keys "$1"
    keys+=("${K[@]}")
    lead_args
    CALL=("${#keys[@]}" "${keys[@]}" "${L[@]}" "$2" "ceil:#chan:$1" bench)
}
# batch_call KIND NOPS TOKEN BUCKET LEASE: CALL for SCRIPT_BATCH carrying NOPS
# acquires (or releases) of ceil:TOKEN
batch_call() {
    local kind=$1 nops=$2 keys=() argv=() k K A L
    if ((SH_REC)); then keys+=("$CEIL_REC_KEY"); fi
    lead_args
    argv+=("${L[@]}")
    for ((k = 0; k < nops; k++)); do
        if [[ $kind == acquire ]]; then
            acq_keys "$3"
            acq_args "$4" "$5"
            keys+=("${K[@]}")
            argv+=(a "${A[@]}")
        else
            rel_keys "$3"
            keys+=("${K[@]}")
            argv+=(r "$5" "ceil:#chan:x" bench)
        fi
    done
    CALL=("${#keys[@]}" "${keys[@]}" "${argv[@]}")
}

# probe_shape PORT: whether the scripts behave under the current shape on db 1
# of that master (flushed before and after); PROBE_WHY says what went wrong.  A
# grant's value may carry its counter ("@<F>", issue 28's token check)
PROBE_WHY=
# first_answer: the first line of a script's answer on stdin, past the master time a
# script that carried a window answers in front of it (issue 28: a number of 12 or more
# digits, the master's clock in ms)
first_answer() {
    local l
    read -r l || true
    if [[ $l =~ ^[0-9]{12,}$ ]]; then read -r l || true; fi
    printf '%s\n' "$l"
}
probe_shape() {
    local p=$1 a a2 r v t b bb br lease2=OTHERotherOTHERotherOTHERother99
    # a refused script is an answer here (redis-cli may exit non-zero on it)
    redis-cli -p "$p" -n 1 flushdb >/dev/null
    ceiling_record "$p"
    acq_call check b42 "$CEIL_LEASE"
    a=$(redis-cli -p "$p" -n 1 eval "$ACQ_SRC" "${CALL[@]}" 2>&1 | first_answer || true)
    v=$(redis-cli -p "$p" -n 1 get ceil:check)
    t=$(redis-cli -p "$p" -n 1 pttl ceil:check)
    acq_call check b42 "$lease2"
    a2=$(redis-cli -p "$p" -n 1 eval "$ACQ_SRC" "${CALL[@]}" 2>&1 | first_answer || true)
    rel_call check "$CEIL_LEASE"
    r=$(redis-cli -p "$p" -n 1 eval "$REL_SRC" "${CALL[@]}" 2>&1 | first_answer || true)
    b=$(redis-cli -p "$p" -n 1 exists ceil:check)
    PROBE_WHY="acquire '$a' (key '$v', pttl $t), second acquire '$a2', release '$r' (key left $b)"
    if [[ $a != 1 || ! $v =~ ^${CEIL_LEASE}(@[0-9]+)?$ || ! $t =~ ^[0-9]+$ || $t -le 0 || $t -gt $CEIL_TTL ||
        $a2 != 0 || $r != 1 || $b != 0 ]]; then
        redis-cli -p "$p" -n 1 flushdb >/dev/null
        return 1
    fi
    if [[ -n $BATCH_SRC ]]; then
        batch_call acquire 1 bcheck b43 "$CEIL_LEASE"
        bb=$(redis-cli -p "$p" -n 1 eval "$BATCH_SRC" "${CALL[@]}" 2>&1 | first_answer || true)
        v=$(redis-cli -p "$p" -n 1 get ceil:bcheck)
        batch_call release 1 bcheck b43 "$CEIL_LEASE"
        br=$(redis-cli -p "$p" -n 1 eval "$BATCH_SRC" "${CALL[@]}" 2>&1 | first_answer || true)
        b=$(redis-cli -p "$p" -n 1 exists ceil:bcheck)
        PROBE_WHY+="; batched acquire '$bb' (key '$v'), batched release '$br' (key left $b)"
        if [[ $bb != 1 || ! $v =~ ^${CEIL_LEASE}(@[0-9]+)?$ || $br != 1 || $b != 0 ]]; then
            redis-cli -p "$p" -n 1 flushdb >/dev/null
            return 1
        fi
    fi
    redis-cli -p "$p" -n 1 flushdb >/dev/null
    return 0
}

# check_scripts: picks the shape the scripts answer to (see above), or stops the
# bench, so that a change of signature cannot go unnoticed
CEIL_LEASE=LEASEleaseLEASEleaseLEASElease12
check_scripts() {
    local p=${REDIS_PORTS[0]} s tried=""
    ((${#CEIL_CANDIDATES[@]})) || scripts_shape
    for s in "${CEIL_CANDIDATES[@]}"; do
        use_shape "$s"
        if probe_shape "$p"; then
            CEIL_CANDIDATES=("$s") # the same scripts next time: no other shape to try
            return 0
        fi
        tried+="
  $s: $PROBE_WHY"
    done
    CEIL_SHAPE=
    die "the ceiling's script arguments fit none of the known shapes for $SCRIPTS_FROM:$tried
update the shapes (CEIL_SHAPES, acq_call/rel_call/batch_call) in $0"
}

# shape_desc: the current shape in words
shape_desc() {
    local k="" a=""
    if ((SH_REC)); then k+="record, "; fi
    k+="lock"
    if ((SH_FENCE)); then k+=", fence"; fi
    if ((SH_RET)); then a+="retention, "; fi
    if ((SH_BUCKET)); then a+="bucket, "; fi
    if ((SH_SHARED)); then k+=", readers, intents"; fi
    if ((SH_WIN)); then a="window, $a"; fi
    echo "$CEIL_SHAPE shape: acquire KEYS $k; ARGV ${a}lease, ttl$( ((SH_ANN)) && echo ", channel, origin")$( ((SH_SHARED)) && echo ", intent, reentrant")"
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
# (redis-benchmark's __rand_int__, drawn anew in each phase and for each
# placeholder: the bucket "b__rand_int__" is a random "b<number>" of its own),
# so some acquires find their key taken and some releases find no key: the
# counts are reported next to the figure.
PHASE_SECS=
ceiling_phase() {
    local n=$1 pipe=$2 kind=$3 p t0 t1 e0 e1 pids=() i=0 shas=() src
    src=$ACQ_SRC
    [[ $kind == release ]] && src=$REL_SRC
    for p in "${REDIS_PORTS[@]}"; do shas+=("$(redis-cli -p "$p" script load "$src")"); done
    if [[ $kind == acquire ]]; then
        acq_call __rand_int__ b__rand_int__ "$CEIL_LEASE"
    else
        rel_call __rand_int__ "$CEIL_LEASE"
    fi
    e0=$(errors_total "${REDIS_PORTS[@]}")
    t0=$(date +%s%N)
    for p in "${REDIS_PORTS[@]}"; do
        timeout 120 redis-benchmark -p "$p" --dbnum 1 -c "$REDIS_CLIENTS" -P "$pipe" -n "$n" -r "$n" --csv \
            evalsha "${shas[$i]}" "${CALL[@]}" >"$TMP/rb-$kind-$pipe-$i.csv" 2>&1 &
        pids+=($!)
        i=$((i + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || die "redis-benchmark failed: $(cat "$TMP"/rb-"$kind"-*.csv)"; done
    t1=$(date +%s%N)
    e1=$(errors_total "${REDIS_PORTS[@]}")
    if ((e1 > e0)); then
        die "the masters answered $((e1 - e0)) errors to the $kind script during the ceiling ($(shape_desc)): $(redis-cli -p "${REDIS_PORTS[0]}" info errorstats | tr -d '\r' | grep '^errorstat' | paste -sd' ' -)"
    fi
    PHASE_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}

# batched_phase N KIND: like ceiling_phase, but as the service sends operations:
# SCRIPT_BATCH carrying BATCH_OPS of them per call (N operations in N/BATCH_OPS calls)
BATCH_OPS=8
batched_phase() {
    local n=$1 kind=$2 p t0 t1 pids=() i=0 shas=() e0 e1
    for p in "${REDIS_PORTS[@]}"; do shas+=("$(redis-cli -p "$p" script load "$BATCH_SRC")"); done
    batch_call "$kind" "$BATCH_OPS" __rand_int__ b__rand_int__ "$CEIL_LEASE"
    e0=$(errors_total "${REDIS_PORTS[@]}")
    t0=$(date +%s%N)
    for p in "${REDIS_PORTS[@]}"; do
        timeout 120 redis-benchmark -p "$p" --dbnum 1 -c "$REDIS_CLIENTS" -P 4 -n "$((n / BATCH_OPS))" -r "$n" --csv \
            evalsha "${shas[$i]}" "${CALL[@]}" >"$TMP/rbb-$kind-$i.csv" 2>&1 &
        pids+=($!)
        i=$((i + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || die "redis-benchmark (batched) failed: $(cat "$TMP"/rbb-"$kind"-*.csv)"; done
    t1=$(date +%s%N)
    e1=$(errors_total "${REDIS_PORTS[@]}")
    if ((e1 > e0)); then
        die "the masters answered $((e1 - e0)) errors to the batched $kind script during the ceiling ($(shape_desc)): $(redis-cli -p "${REDIS_PORTS[0]}" info errorstats | tr -d '\r' | grep '^errorstat' | paste -sd' ' -)"
    fi
    PHASE_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}

# ceiling_batched N: sets CEIL_OUT to "cycles/s redis-us-per-cycle" with batched calls
ceiling_batched() {
    local n=$1 ta tr c0 c1 p
    ceiling_prepare "$n"
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
    ceiling_prepare "$n"
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
        SCRIPTS_FROM+=", $CEIL_SHAPE shape"
        echo "bench: raw-Redis ceiling: redis-benchmark on all $NMASTERS masters at once, EVALSHA of the scripts from $SCRIPTS_FROM ($(shape_desc))"
    fi
    local u1 u2
    ceiling "$REDIS_N" "$REDIS_PIPE"
    read -r c1 a1 r1 ok hit u1 <<<"$CEIL_OUT"
    # counted from the keys with an expiry: the counters of the retention shapes
    # have one too, so there these do not tell lock keys apart
    if ((SH_RET)); then ok=-; hit=-; fi
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

# ---------------------------------------------------------------- park
# Many parked connections on one instance (a fleet electing leaders and watching
# them): BENCH_PARK_N (10000) duplex streamed holds, then as many one-way holds, then
# as many watches, then BENCH_PARK_N duplex holds and BENCH_PARK_N watches of the held
# names at once, each phase on a fresh service (defaults, plus BENCH_SERVICE_ARGS) and
# fresh masters.  Each phase: the service's RSS and open descriptors while parked,
# its CPU and the masters' over BENCH_PARK_SECONDS (20) of parked time (the window
# starts once every connection had its chance to park), extensions and pings in it.
# The holds' ttl is BENCH_PARK_TTL_MS (30000): an extension every 10 s each, a ping
# every 7.5 s.
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

# park_phase NAME KIND... (KIND: duplex|oneway|watch, each BENCH_PARK_N connections):
# one row of park.tsv
park_phase() {
    local name=$1 n=${BENCH_PARK_N:-10000} ttl=${BENCH_PARK_TTL_MS:-30000} secs=${BENCH_PARK_SECONDS:-20}
    shift
    local ramp=${BENCH_PARK_RAMP:-2000} warm lgs=() k i=0 r0 f0 r1 f1 c0 c1 rc0 rc1 t0 t1
    # connections ramp in, then the grants: 60 % more than the ramp alone, at least 5 s
    warm=$(((n * 16 / 10) / ramp + 5))
    start_masters
    start_service
    sleep 1
    r0=$(rss_kib "$SVC_PID")
    f0=$(fd_count "$SVC_PID")
    t0=$(date +%s%N)
    c0=$(cpu_ticks "$SVC_PID")
    rc0=$(cpu_ticks "${REDIS_PIDS[@]}")
    sleep 3
    t1=$(date +%s%N)
    c1=$(cpu_ticks "$SVC_PID")
    rc1=$(cpu_ticks "${REDIS_PIDS[@]}")
    local idle_svc idle_redis
    idle_svc=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v t="$((t1 - t0))" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / (t / 1e9) }')
    idle_redis=$(awk -v a="$rc0" -v b="$rc1" -v hz="$HZ" -v t="$((t1 - t0))" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / (t / 1e9) }')
    for k in "$@"; do
        local args=(-m park --park "$k" -c "$n" --ttl-ms "$ttl" --ramp "$ramp" -d "$secs" -w "$warm"
            --timeout-ms 60000 --drain-ms 20000 --prefix "pk$$-" --json --label "$name-$k" --metrics
            --cpu-pids "svc=$SVC_PID" --cpu-pids "redis=$(IFS=,; echo "${REDIS_PIDS[*]}")"
            --redis-ports "$(IFS=,; echo "${REDIS_PORTS[*]}")")
        [[ $k == watch ]] && args+=(--wait-ms 60000)
        "$LOADGEN" -p "$SVC_PORT" "${args[@]}" >"$OUT/raw/$name-$k.json" 2>"$OUT/raw/$name-$k.err" &
        lgs+=($!)
        PIDS+=($!)
        i=$((i + 1))
    done
    # RSS and descriptors halfway through the window
    sleep $((warm + secs / 2))
    r1=$(rss_kib "$SVC_PID")
    f1=$(fd_count "$SVC_PID")
    local ok=1
    for k in "${lgs[@]}"; do wait "$k" || ok=0; done
    stop_pids "${lgs[@]}"
    check_alive redlockd "$SVC_PID" "$SVC_LOG"
    ((ok)) || note "park $name: a load generator failed ($(cat "$OUT"/raw/"$name"-*.err | head -3))"
    # one row: the phase's figures summed over its load generators
    jq -s -r --arg name "$name" --argjson n "$n" --argjson r0 "$r0" --argjson r1 "$r1" --argjson f0 "$f0" \
        --argjson f1 "$f1" --arg idle_svc "$idle_svc" --arg idle_redis "$idle_redis" --argjson ttl "$ttl" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '
        def r(n): . * pow(10; n) | round / pow(10; n);
        (map(.window.parked_end // 0) | add) as $parked
        | (.[0].window.secs) as $s
        | (.[0].window.cpu_s.svc / $s) as $svc | (.[0].window.cpu_s.redis / $s) as $redis
        | ([.[].window.metrics.extended // 0] | max) as $ext
        | ([.[].window.metrics.batched_ops // 0] | max) as $bops | ([.[].window.metrics.batches // 0] | max) as $bat
        | ([.[].window.redis_commands | to_entries[] | select(.key | startswith("eval")) | .value[0]] | add // 0) as $calls
        | [$name, (map(.kind) | join("+")), $n * length, $parked, (map(.park.peak) | add),
           (map(.park.dropped + .park.refused) | add), (map(.park.retries // 0) | add),
           ($r0 / 1024 | r(1)), ($r1 / 1024 | r(1)), (if $parked > 0 then (($r1 - $r0) / $parked | r(2)) else "-" end),
           $f0, $f1, $idle_svc, ($svc * 100 | r(2)), $idle_redis, ($redis * 100 | r(2)),
           ($ext / $s | r(1)), (if $ext > 0 then ($redis * 1e6 * $s / $ext | r(1)) else "-" end),
           (if $bat > 0 then ($bops / $bat | r(1)) else "-" end), ($calls / $s | r(1)),
           ((([.[].ping.count] | add) / $s) | r(1)), ([.[].ping.p99_ms] | max | r(2)),
           ((([.[].park.watch_answers] | add) / $s) | r(1)), $load]
        | @tsv' "$OUT"/raw/"$name"-*.json >>"$OUT/park.tsv"
    stop_pids "$SVC_PID"
    stop_masters
}

bench_park() {
    mkdir -p "$OUT/raw"
    header "park: ${BENCH_PARK_N:-10000} connections per kind, ttl ${BENCH_PARK_TTL_MS:-30000} ms, ${BENCH_PARK_SECONDS:-20} s parked; service args: ${SVC_ARGS:-(defaults)}"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    printf 'phase\tkinds\tconns\tparked\tpeak\tdropped_or_refused\tretried_503\trss_idle_mib\trss_parked_mib\tkib_per_parked\tfds_idle\tfds_parked\tsvc_idle_pct\tsvc_parked_pct\tredis_idle_pct\tredis_parked_pct\text_per_s\tredis_us_per_ext\tops_per_batch\tscript_calls_per_s\tpings_per_s\tping_p99_ms\twatch_answers_per_s\tload\n' >"$OUT/park.tsv"
    local p
    for p in ${BENCH_PARK_PHASES:-duplex oneway watch fleet}; do
        echo "bench: park phase $p ($(cut -d' ' -f1-3 /proc/loadavg) load)"
        case $p in
        fleet) park_phase fleet duplex watch ;;
        *) park_phase "$p" "$p" ;;
        esac
        tail -1 "$OUT/park.tsv" | awk -F'\t' '{ printf "  %s: %s of %s parked (peak %s, %s dropped or refused, %s 503s tried again); RSS %s -> %s MiB (%s KiB per parked); fds %s -> %s; service CPU %s%% idle, %s%% parked; masters %s%% -> %s%%; %s ext/s at %s us each (Redis), %s ops per batch; %s pings/s (p99 %s ms); %s watch answers/s\n", $1, $4, $3, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $21, $22, $23 }'
    done
    load_line >/dev/null
    {
        echo
        echo "== parked connections on one instance, ${BENCH_PARK_N:-10000} per kind; $(cat "$OUT/load.txt")"
        column -t -s $'\t' "$OUT/park.tsv"
        echo "raw results: $OUT"
    } | tee "$OUT/report.txt"
}

# ---------------------------------------------------------------- compare
# Builds of the service side by side: "base" (the baseline), "new" ($REDLOCKD) and
# any BENCH_EXTRA_BUILDS.  Each target run starts 5 fresh redis-servers (the builds
# keep different keys on the masters), starts that build, runs every point on it,
# and stops both; the order of the targets rotates run by run, so that a slow spell
# of the machine lands on each and the order favours none.  Reported: the median of
# the runs, figure by figure, and each build's over base's, of the medians and run
# by run.
#
# The points (BENCH_COMPARE_POINTS, default all; "name@conns" or a name), each with
# the unit its costs are counted per ("op"):
#   cycle      exclusive lock cycles (POST + DELETE) on random names, c = BENCH_CONNS
#   shared     reader cycles (?mode=shared)
#   sem8, sem1024   permit cycles of 8- and 1024-permit semaphores on random names
#   sem1024one permit cycles of the clients sharing one 1024-permit semaphore
#   semfull    acquires refused by a full 1024-permit semaphore (filled first): per 409
#   reentrant  reentrant cycles: acquire, enter again, release twice (one cycle)
#   set        two-name sets (POST /locks, DELETE /locks)
#   extend     one-way streamed holds (300, ttl 1.5 s): per extension (/metrics)
#   hot        no-wait clients on one name (c = 8, 64, 256): per grant, 409s beside
#   handoff    waiters on one name: per grant
#   acquire    exclusive acquires only (random names, ttl 2 s): per grant
COMPARE_ALL_POINTS="cycle shared sem8 sem1024 sem1024one semfull reentrant set extend hot handoff acquire"

# build_ref REF: builds git ref REF with its own make in $BIN/src-<sha> (kept, reused)
# and sets BUILT_BIN, BUILT_SRC, BUILT_DESC
build_ref() {
    local ref=$1 sha dir log
    need git git
    sha=$(git rev-parse --verify -q "$ref^{commit}") || die "$ref: no such commit in $(pwd)"
    dir=$BIN/src-${sha:0:12}
    log=$dir.build.log
    if [[ -x $dir/bin/redlockd && -f $dir/.bench-ref ]]; then
        note "$ref (${sha:0:7}) already built: $dir/bin/redlockd"
    else
        note "building $ref (${sha:0:7}) in $dir (log: $log)"
        rm -rf "$dir"
        mkdir -p "$dir"
        git archive --format=tar "$sha" | tar -x -C "$dir" || die "git archive $sha failed"
        # its own make, not this one's flags or job server
        if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
            nice -n 5 make -C "$dir" -j"$(nproc)" bin/redlockd >"$log" 2>&1; then
            tail -20 "$log" >&2
            die "$ref (${sha:0:7}) did not build (log: $log)"
        fi
        echo "$sha" >"$dir/.bench-ref"
    fi
    BUILT_BIN=$dir/bin/redlockd
    BUILT_SRC=$dir
    BUILT_DESC="$BUILT_BIN, built from $(git log -1 --format='%h %s' "$sha" | cut -c1-60)"
    if [[ $sha != "$ref"* ]]; then BUILT_DESC+=" ($ref)"; fi
}

# printscript_of SRC: its scripts printed by its own printscript.c (or this one's)
# built against its service/scripts.c; empty when there is no source
printscript_of() {
    local src=$1 ps out
    [[ -n $src && -f $src/service/scripts.c ]] || return 0
    ps=$src/tests/bench/printscript.c
    [[ -f $ps ]] || ps=tests/bench/printscript.c
    out=$src/printscript
    if [[ ! -x $out ]]; then
        "${CC:-cc}" -std=c11 -D_GNU_SOURCE -O2 -I"$src/service" -o "$out" "$ps" "$src"/service/scripts*.c 2>"$out.err" ||
            { note "the scripts of $src did not build ($out.err): no ceiling for it"; return 0; }
    fi
    echo "$out"
}

# add_build LABEL SPEC: SPEC is a binary (its scripts from no source, unless
# "binary@ref" names the commit it was built from) or a git ref to build
declare -A COMPARE_BIN COMPARE_SCRIPTS COMPARE_DESC
COMPARE_TARGETS=()
add_build() {
    local label=$1 spec=$2 bin ref=
    [[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || die "build label '$label': letters, digits, . _ - only"
    if [[ $spec == *@* ]]; then
        ref=${spec#*@}
        spec=${spec%@*}
    fi
    if [[ -f $spec && -x $spec ]]; then
        bin=$spec
        COMPARE_DESC[$label]="$spec"
        COMPARE_SCRIPTS[$label]=
        if [[ -n $ref ]]; then
            build_ref "$ref"
            COMPARE_SCRIPTS[$label]=$(printscript_of "$BUILT_SRC")
            COMPARE_DESC[$label]+=" (scripts of $ref)"
        fi
    else
        build_ref "$spec"
        bin=$BUILT_BIN
        COMPARE_DESC[$label]=$BUILT_DESC
        COMPARE_SCRIPTS[$label]=$(printscript_of "$BUILT_SRC")
    fi
    COMPARE_BIN[$label]=$bin
    COMPARE_TARGETS+=("$label")
}

# new_desc: what $REDLOCKD was built from, as far as git knows
new_desc() {
    local d
    d="$REDLOCKD, tree at $(git log -1 --format='%h %s' HEAD 2>/dev/null | cut -c1-60)"
    if [[ -n $(git status --porcelain -- service 2>/dev/null) ]]; then d+=" + uncommitted changes in service/"; fi
    echo "$d"
}

COMPARE_CEIL=${BENCH_COMPARE_CEILING:-1}
# BENCH_COMPARE_TLS=1 (make bench-tls): one build, $REDLOCKD, against masters reached
# over TCP (base) and over TLS (new, rediss://), run by run alternately as above
COMPARE_TLS=${BENCH_COMPARE_TLS:-0}
COMPARE_CEIL_N=${BENCH_COMPARE_REDIS_N:-10000}
COMPARE_HOT=
declare -A POINT_UNIT
FULL_PERMITS=1024

# fill_semaphore NAME: every one of the FULL_PERMITS permits of semaphore NAME held
# (ttl 10 min) on the current masters.  Written on the masters directly, as a grant
# writes them (the record "redlock:#sem:NAME" holding the number of permits, each slot
# "redlock:#sem:NAME#<i>" a lease, the count "redlock:#sem:NAME#h"): taking them through the service one by one gets
# slower with every permit taken (each refusal and retry reads the slots), and near
# the end its rounds outrun the node timeout on this machine.  The service's GET
# then has to find none free; 0, or 1 (noted) when it does not.
fill_semaphore() {
    local name=$1 p free rec="redlock:#sem:$1" until
    for p in "${REDIS_PORTS[@]}"; do
        # the count of held slots ("#h", slot -> expiry in the master's clock, ms) as a
        # grant keeps it since issue 23; a build without it ignores the key
        until=$(($(redis-cli -p "$p" TIME | head -1) * 1000 + 600000))
        {
            printf 'SET %s %s PX 600000\n' "$rec" "$FULL_PERMITS"
            awk -v n="$FULL_PERMITS" -v r="$rec" -v u="$until" 'BEGIN { for (i = 0; i < n; i++) printf "SET %s#%d fill%06dfill%06dfill PX 600000\nZADD %s#h %s %d\n", r, i, i, i, r, u, i }'
            printf 'PEXPIRE %s#h 600000\n' "$rec"
            printf 'SET redlock:#expiry 1 PX 600000\n'
        } | redis-cli -p "$p" >/dev/null
    done
    free=$(curl -s "http://127.0.0.1:$SVC_PORT/semaphores/$name" | jq -r '.free // empty' 2>/dev/null || true)
    [[ $free == 0 ]] && return 0
    note "semaphore $name not full after the fill (free: ${free:-?}): its refusals are not all 'full'"
    return 1
}

# compare_target_run RUN TARGET: fresh masters, that build, every point, all stopped
compare_target_run() {
    local run=$1 t=$2 spec e k p point
    MASTERS_TLS=0
    if [[ $COMPARE_TLS == 1 && $t == new ]]; then MASTERS_TLS=1; fi
    start_masters
    start_service "${COMPARE_BIN[$t]}" "$TMP/redlockd-$t-run$run.log"
    TARGET_PORT[$t]=$SVC_PORT
    TARGET_PIDS[$t]=$SVC_PID
    TARGET_LOG[$t]=$SVC_LOG
    TARGET_ARGS[$t]=
    echo "bench: run $run of $RUNS, $t ($(cut -d' ' -f1-3 /proc/loadavg) load)"
    for spec in "${POINTS[@]}"; do
        [[ $spec == "$t|"* ]] || continue
        IFS='|' read -r _ point _ _ <<<"$spec"
        if [[ $point == semfull ]]; then fill_semaphore "${COMPARE_HOT}${run}f" || true; fi
        run_point "$run" "${spec//$COMPARE_HOT/$COMPARE_HOT$run}"
    done
    check_alive "$t" "$SVC_PID" "$SVC_LOG"
    # what the masters saw: error replies (a refused script, say) and the keys left
    e=$(errors_total "${REDIS_PORTS[@]}")
    k=0
    for p in "${REDIS_PORTS[@]}"; do k=$((k + $(redis-cli -p "$p" dbsize))); done
    printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$t" "$e" "$k" "$(expires_db0 "${REDIS_PORTS[@]}")" >>"$OUT/masters.tsv"
    if ((e > 0)); then
        note "$t run $run: the masters answered $e error replies: $(redis-cli -p "${REDIS_PORTS[0]}" info errorstats | tr -d '\r' | grep '^errorstat' | paste -sd' ' -)"
    fi
    stop_pids "$SVC_PID"
    if [[ $COMPARE_CEIL == 1 && -n ${COMPARE_SCRIPTS[$t]:-} ]]; then compare_ceiling "$run" "$t"; fi
    stop_masters
}

# compare_ceiling RUN TARGET: the raw-Redis ceiling (pipelined, and batched as the
# service sends) with that build's own scripts, on the masters its run used (the
# service stopped): what the scripts alone cost Redis, without the service
compare_ceiling() {
    local run=$1 t=$2 ps=${COMPARE_SCRIPTS[$2]} c1 u1 c3=0 u3=0
    if ! ACQ_SRC=$("$ps" acquire) || ! REL_SRC=$("$ps" release); then
        note "$ps failed: no ceiling for $t"
        return 0
    fi
    BATCH_SRC=$("$ps" batch 2>/dev/null) || BATCH_SRC=
    SCRIPTS_FROM="$t"
    scripts_shape
    check_scripts
    ceiling "$COMPARE_CEIL_N" "$REDIS_PIPE"
    read -r c1 _ _ _ _ u1 <<<"$CEIL_OUT"
    if [[ -n $BATCH_SRC ]]; then
        ceiling_batched "$COMPARE_CEIL_N"
        read -r c3 u3 <<<"$CEIL_OUT"
    fi
    echo "  run $run $t ceiling (its own scripts, $CEIL_SHAPE shape, redis-benchmark on all masters): pipelined $c1 cycles/s, $u1 us/cycle; batched $BATCH_OPS per call $c3 cycles/s, $u3 us/cycle  load $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$t" "$c1" "$u1" "$c3" "$u3" "$CEIL_SHAPE" >>"$OUT/ceiling-compare.tsv"
}

expires_db0() { # PORT...: keys with an expiry in db 0
    local p t=0 v
    for p in "$@"; do
        v=$(redis-cli -p "$p" info keyspace | tr -d '\r' | sed -n 's/^db0:keys=[0-9]*,expires=\([0-9]*\).*/\1/p')
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

# point_wanted NAME CONNS: whether BENCH_COMPARE_POINTS asks for it
point_wanted() {
    local w
    for w in ${BENCH_COMPARE_POINTS:-$COMPARE_ALL_POINTS}; do
        [[ $w == "$1" || $w == "$1@$2" ]] && return 0
    done
    return 1
}

# compare_points T: the points of target T into POINTS (and their units)
compare_points() {
    local t=$1 c h=$COMPARE_HOT
    add_p() { # NAME CONNS UNIT ARGS
        point_wanted "$1" "$2" || return 0
        POINTS+=("$t|$1|$2|$4")
        POINT_UNIT[$1]=$3
    }
    for c in $CONNS; do add_p cycle "$c" cycle ""; done
    # the c=8 kinds below are set against an exclusive cycle at c=8 (batches of
    # another size cost another Redis CPU per op): cycle@8 runs with them
    if [[ " $CONNS " != *" 8 "* ]] && { point_wanted sem1024 8 || point_wanted sem1024one 8; }; then
        POINTS+=("$t|cycle|8|")
        POINT_UNIT[cycle]=cycle
    fi
    add_p shared "$HOT_CONNS" cycle "-k shared"
    add_p sem8 "$HOT_CONNS" cycle "-k sem --permits 8"
    # (before the counted record, a 1024-permit semaphore's release read every slot: at
    # c=64 its rounds outran the node timeout on this machine; c=8 is kept to compare
    # with such builds)
    for c in 8 "$HOT_CONNS"; do
        add_p sem1024 "$c" cycle "-k sem --permits 1024"
        add_p sem1024one "$c" cycle "-k sem --permits 1024 --name ${h}p$c"
    done
    add_p semfull 4 409 "-m contention -k sem --permits $FULL_PERMITS --name ${h}f --ttl-ms 600000"
    add_p reentrant "$HOT_CONNS" cycle "-k reentrant --depth 2"
    add_p set "$HOT_CONNS" cycle "-k set --set-size 2"
    add_p extend 300 ext "-m park --park oneway --ttl-ms 1500 --prefix ${h}x"
    for c in ${BENCH_HOT_NAME_CONNS:-8 64 256}; do
        add_p hot "$c" grant "-m contention --name ${h}c$c --ttl-ms 10000"
    done
    add_p handoff "$HOT_CONNS" grant "-m handoff --name ${h}h --ttl-ms 10000 --wait-ms 5000"
    add_p acquire "$HOT_CONNS" grant "-m acquire-only --ttl-ms 2000 --prefix ${h}a"
}

bench_compare() {
    local run t c i n
    [[ -n ${BENCH_CONNS:-} ]] || CONNS="1 64 256"
    if [[ $COMPARE_TLS == 1 ]]; then
        # one build: its masters over TCP (base) and over TLS (new)
        COMPARE_BIN[base]=$REDLOCKD
        COMPARE_DESC[base]="$REDLOCKD, masters over TCP (host:port)"
        COMPARE_SCRIPTS[base]=
        COMPARE_CEIL=0
    elif [[ -n ${BENCH_BASELINE:-} ]]; then
        [[ -x ${BENCH_BASELINE%@*} && -f ${BENCH_BASELINE%@*} ]] || die "BENCH_BASELINE=$BENCH_BASELINE is not an executable file"
        add_build base "$BENCH_BASELINE"
    else
        add_build base "${BENCH_BASELINE_REF:-HEAD~1}"
    fi
    COMPARE_TARGETS=(base)
    COMPARE_BIN[new]=$REDLOCKD
    COMPARE_DESC[new]=$(new_desc)
    if [[ $COMPARE_TLS == 1 ]]; then
        COMPARE_DESC[new]+="; masters over TLS (rediss://, verified, with a client certificate; Redis on $(openssl version | cut -d' ' -f1-2), redlockd on GnuTLS $(pkg-config --modversion gnutls 2>/dev/null || echo '?'))"
    fi
    COMPARE_SCRIPTS[new]=
    if [[ -x $PRINTSCRIPT ]]; then COMPARE_SCRIPTS[new]=$PRINTSCRIPT; fi
    COMPARE_TARGETS+=(new)
    local x
    for x in ${BENCH_EXTRA_BUILDS:-}; do
        [[ $x == *=* ]] || die "BENCH_EXTRA_BUILDS: '$x' is not label=binary|ref|binary@ref"
        add_build "${x%%=*}" "${x#*=}"
    done
    for t in "${COMPARE_TARGETS[@]}"; do [[ -x ${COMPARE_BIN[$t]} ]] || die "${COMPARE_BIN[$t]} missing"; done
    if [[ $COMPARE_TLS != 1 ]] && cmp -s "${COMPARE_BIN[base]}" "$REDLOCKD"; then
        note "the baseline and $REDLOCKD are the same binary: an A/A run (the noise floor)"
    fi
    : >"$OUT/builds.tsv"
    for t in "${COMPARE_TARGETS[@]}"; do printf '%s\t%s\n' "$t" "${COMPARE_DESC[$t]}" >>"$OUT/builds.tsv"; done
    printf 'run\ttarget\tmaster_error_replies\tkeys_left\tkeys_with_expiry\n' >"$OUT/masters.tsv"
    if [[ $COMPARE_CEIL == 1 ]]; then
        printf 'run\ttarget\tpipelined_cycles_per_s\tpipelined_redis_us_per_cycle\tbatched_cycles_per_s\tbatched_redis_us_per_cycle\tscript_shape\n' >"$OUT/ceiling-compare.tsv"
    fi
    local desc=""
    for t in "${COMPARE_TARGETS[@]}"; do desc+="compare: $t = ${COMPARE_DESC[$t]}"$'\n'; done
    header "${desc}compare: every target run on $NMASTERS fresh redis-servers; the order of the targets rotates run by run"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    COMPARE_HOT="hot$$x$RANDOM"
    for t in "${COMPARE_TARGETS[@]}"; do
        TARGET_ORDER+=("$t")
        compare_points "$t"
    done
    n=${#COMPARE_TARGETS[@]}
    for ((run = 1; run <= RUNS; run++)); do
        for ((i = 0; i < n; i++)); do compare_target_run "$run" "${COMPARE_TARGETS[$(((i + run - 1) % n))]}"; done
    done
    load_line
    summarize
    compare_summary
    report_compare | tee "$OUT/report.txt"
}

# the figures compared, as jq expressions over one run's JSON (null: not
# meaningful); "op" is the point's unit: a cycle, a grant, a 409 or an extension
COMPARE_METRICS='
  (.unit // "cycle") as $u
  | (if $u == "cycle" then .cycles_per_s elif $u == "grant" then .grants_per_s
     elif $u == "409" then .conflicts_per_s
     elif $u == "ext" then (if (.window.metrics.extended // null) != null and .window.secs > 0
                            then .window.metrics.extended / .window.secs else null end)
     else null end) as $ops
  | (if $ops != null and $ops > 0 then $ops else null end) as $o
  | {ops_per_s: $ops,
     grants_per_s: .grants_per_s,
     conflicts_per_s: .conflicts_per_s,
     acq_p50_ms: (if .acquire.count > 0 then .acquire.p50_ms else null end),
     acq_p99_ms: (if .acquire.count > 0 then .acquire.p99_ms else null end),
     rel_p99_ms: (if .release.count > 0 then .release.p99_ms else null end),
     conflict_p99_ms: (if .conflict.count > 0 then .conflict.p99_ms else null end),
     gap_p50_ms: (if .mode == "handoff" then .gap.p50_ms else null end),
     gap_p99_ms: (if .mode == "handoff" then .gap.p99_ms else null end),
     redis_cpu_cores: .redis_cpu_cores,
     svc_cpu_cores: .target_cpu_cores,
     redis_us_per_op: (if $o then .redis_cpu_cores * 1e6 / $o else null end),
     svc_us_per_op: (if $o then .target_cpu_cores * 1e6 / $o else null end),
     redis_script_us_per_op: (if $o and .redis_cmdstats then .redis_cmdstats.script_usec / .cmd_secs / $o else null end),
     script_calls_per_op: (if $o and .redis_cmdstats then .redis_cmdstats.script_calls / .cmd_secs / $o else null end),
     redis_calls_per_op: (if $o and .redis_cmdstats then .redis_cmdstats.inner_calls / .cmd_secs / $o else null end),
     ops_per_batch: (if (.window.metrics.batches // 0) > 0 then .window.metrics.batched_ops / .window.metrics.batches else null end),
     # per round: Redis CPU (all masters) per script call on one master (a round sends
     # one to each); what a point costs when its requests fail (no op to count)
     redis_us_per_round: (if .redis_cmdstats and .redis_cmdstats.script_calls > 0
                          then .redis_cpu_cores * 1e6 / (.redis_cmdstats.script_calls / .cmd_secs / $nm) else null end),
     held_local_per_s: (if (.window.metrics // null) != null and .window.secs > 0 then .window.metrics.held_local / .window.secs else null end),
     errors: .errors.total}'

# compare.tsv: point conns metric target median over_base runs per_run_over_base
# (medians; errors summed over runs)
compare_summary() {
    local spec t point conns files b
    printf 'point\tconns\tmetric\ttarget\tvalue\tover_base\truns\tper_run_over_base\n' >"$OUT/compare.tsv"
    for spec in "${POINTS[@]}"; do
        IFS='|' read -r t point conns _ <<<"$spec"
        [[ $t == base ]] || continue
        for t in "${COMPARE_TARGETS[@]}"; do
            files=("$OUT/raw/$t-$point-c$conns"-run*.json)
            b=("$OUT/raw/base-$point-c$conns"-run*.json)
            [[ -e ${files[0]} ]] || { note "no results for $t $point c=$conns"; continue; }
            [[ -e ${b[0]} ]] || b=("${files[@]}")
            jq -n -r --arg p "$point" --arg c "$conns" --arg t "$t" \
                --argjson nm "$NMASTERS" --slurpfile A <(cat "${b[@]}") --slurpfile B <(cat "${files[@]}") "
                def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                         else (.[length / 2 - 1] + .[length / 2]) / 2 end;
                def r: if . == null then \"-\" elif (. | fabs) >= 100 then (. | round) elif (. | fabs) >= 10 then (. * 10 | round / 10)
                       else (. * 1000 | round / 1000) end;
                def q(a; b): if a == null or b == null or a == 0 then null else b / a end;
                def r2: if . == null then \"-\" else (. * 100 | round / 100) end;
                def m: $COMPARE_METRICS;
                (\$A | map({run, v: m})) as \$a | (\$B | map({run, v: m})) as \$b |
                (\$b[0].v | keys_unsorted)[] as \$k |
                (\$a | map(.v[\$k]) | map(select(. != null))) as \$xa |
                (\$b | map(.v[\$k]) | map(select(. != null))) as \$xb |
                select((\$xb | length) > 0) |
                (if \$k == \"errors\" then (\$xa | add) else (\$xa | med) end) as \$va |
                (if \$k == \"errors\" then (\$xb | add) else (\$xb | med) end) as \$vb |
                [\$p, \$c, \$k, \$t, (\$vb | r), (if \$k == \"errors\" or \$t == \"base\" then \"-\" else (q(\$va; \$vb) | r2) end),
                 (\$xb | map(r | tostring) | join(\",\")),
                 (if \$t == \"base\" then \"-\" else ([\$a[] as \$x | \$b[] | select(.run == \$x.run) | q(\$x.v[\$k]; .v[\$k]) | r2 | tostring] | join(\",\")) end)]
                | @tsv" >>"$OUT/compare.tsv"
        done
    done
}

# cmp_val POINT CONNS METRIC TARGET [ratio|runs|ratios]: one value of compare.tsv
cmp_val() {
    awk -F'\t' -v p="$1" -v c="$2" -v m="$3" -v t="$4" -v w="${5:-value}" '
        NR > 1 && $1 == p && $2 == c && $3 == m && $4 == t {
            print (w == "ratio" ? $6 : w == "runs" ? $7 : w == "ratios" ? $8 : $5); f = 1; exit }
        END { if (!f) print "-" }' "$OUT/compare.tsv"
}

# cmd_breakdown TARGET POINT CONNS: the commands the masters ran per op (the point's
# unit), median of the runs, most frequent first
cmd_breakdown() {
    local files=("$OUT/raw/$1-$2-c$3"-run*.json)
    [[ -e ${files[0]} ]] || { echo -; return; }
    jq -s -r --arg unit "${POINT_UNIT[$2]:-cycle}" '
        def med: sort | if length == 0 then 0 elif length % 2 == 1 then .[length / 2 | floor]
                 else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        map(select(.redis_commands)
            | (if $unit == "cycle" then .cycles_per_s elif $unit == "grant" then .grants_per_s
               elif $unit == "409" then .conflicts_per_s
               else ((.window.metrics.extended // 0) / (.window.secs // 1)) end) as $rate
            | ($rate * .cmd_secs) as $ops
            | select($ops > 0)
            | .redis_commands | with_entries(select(.key | test("^(info|dbsize|ping)$") | not) | .value = .value[0] / $ops))
        | (map(keys[]) | unique) as $ks
        | [$ks[] as $k | {k: $k, v: ([.[] | .[$k] // 0] | med)}] | sort_by(-.v)
        | map("\(.k) \(.v * 10 | round / 10)") | join(", ")' "${files[@]}"
}

report_compare() {
    local spec point conns t fmt line u h=$HOT_CONNS
    fmt='%-11s %5s %-12s %10s %9s %9s %8s %8s %9s %9s %7s %7s %6s %8s %6s\n'
    echo
    echo "== builds side by side, median of $RUNS interleaved run(s) of ${SECS}s (+${WARM}s warm-up) each, fresh masters per target run; $(cat "$OUT/load.txt")"
    for t in "${COMPARE_TARGETS[@]}"; do echo "   $t: ${COMPARE_DESC[$t]}"; done
    echo "   op: the point's unit (cycle, grant, 409, ext = a streamed hold's extension); Redis CPU: all $NMASTERS masters together, per op, over the measured window"
    echo "   calls: script calls (EVALSHA) per op, all masters; r.call: the commands those scripts ran per op; b: operations per batched call;"
    echo "   us/round: Redis CPU (all masters) per script call sent to each master (per op when each goes alone, per batch when batched)"
    # shellcheck disable=SC2059
    printf "$fmt" point conns build "ops/s" "grants/s" "409/s" "acq_p50" "acq_p99" "redis_us" "svc_us" "calls" "r.call" "b" "us/round" errors
    for spec in "${POINTS[@]}"; do
        IFS='|' read -r t point conns _ <<<"$spec"
        [[ $t == base ]] || continue
        u=${POINT_UNIT[$point]:-cycle}
        local first=1
        for t in "${COMPARE_TARGETS[@]}"; do
            # shellcheck disable=SC2059
            printf "$fmt" "$( ((first)) && echo "$point" )" "$( ((first)) && echo "$conns" )" "$t" \
                "$(cmp_val "$point" "$conns" ops_per_s "$t")/$u" "$(cmp_val "$point" "$conns" grants_per_s "$t")" \
                "$(cmp_val "$point" "$conns" conflicts_per_s "$t")" \
                "$(cmp_val "$point" "$conns" acq_p50_ms "$t")" "$(cmp_val "$point" "$conns" acq_p99_ms "$t")" \
                "$(cmp_val "$point" "$conns" redis_us_per_op "$t")" "$(cmp_val "$point" "$conns" svc_us_per_op "$t")" \
                "$(cmp_val "$point" "$conns" script_calls_per_op "$t")" "$(cmp_val "$point" "$conns" redis_calls_per_op "$t")" \
                "$(cmp_val "$point" "$conns" ops_per_batch "$t")" "$(cmp_val "$point" "$conns" redis_us_per_round "$t")" \
                "$(cmp_val "$point" "$conns" errors "$t")"
            first=0
        done
        for t in "${COMPARE_TARGETS[@]:1}"; do
            # shellcheck disable=SC2059
            printf "$fmt" "" "" "$t/base" \
                "$(cmp_val "$point" "$conns" ops_per_s "$t" ratio)" "$(cmp_val "$point" "$conns" grants_per_s "$t" ratio)" \
                "$(cmp_val "$point" "$conns" conflicts_per_s "$t" ratio)" \
                "$(cmp_val "$point" "$conns" acq_p50_ms "$t" ratio)" "$(cmp_val "$point" "$conns" acq_p99_ms "$t" ratio)" \
                "$(cmp_val "$point" "$conns" redis_us_per_op "$t" ratio)" "$(cmp_val "$point" "$conns" svc_us_per_op "$t" ratio)" \
                "$(cmp_val "$point" "$conns" script_calls_per_op "$t" ratio)" "$(cmp_val "$point" "$conns" redis_calls_per_op "$t" ratio)" "" \
                "$(cmp_val "$point" "$conns" redis_us_per_round "$t" ratio)" ""
        done
    done
    echo
    echo "Against the exclusive cycle of the same build at the same c (c=$h when that c has no cycle point): each kind's Redis CPU per op / the cycle's (target: <= 2); a reentrant cycle enters --depth times and a set locks --set-size names, so those are also given per hold and per name"
    for t in "${COMPARE_TARGETS[@]}"; do
        local ex exc per line=""
        ex=$(cmp_val cycle "$h" redis_us_per_op "$t")
        for spec in "${POINTS[@]}"; do
            IFS='|' read -r _ point conns args <<<"$spec"
            [[ ${spec%%|*} == base && $point != cycle && ${POINT_UNIT[$point]} == cycle ]] || continue
            exc=$(cmp_val cycle "$conns" redis_us_per_op "$t")
            [[ $exc =~ ^[0-9.]+$ ]] || exc=$ex
            line+="${line:+, }$point@$conns $(ratio "$(cmp_val "$point" "$conns" redis_us_per_op "$t")" "$exc")"
            per=""
            [[ $args =~ --depth\ ([0-9]+) ]] && per=${BASH_REMATCH[1]}
            [[ $args =~ --set-size\ ([0-9]+) ]] && per=${BASH_REMATCH[1]}
            [[ -n $per ]] && line+=" ($(ratio "$(cmp_val "$point" "$conns" redis_us_per_op "$t")" "$(awk -v e="$exc" -v n="$per" 'BEGIN { if (e + 0 > 0) printf "%.4f", e * n }')") per $([[ $args == *--depth* ]] && echo hold || echo name))"
        done
        line+=", extension $(ratio "$(cmp_val extend 300 redis_us_per_op "$t")" "$ex")"
        echo "  $t (cycle ${ex} us): $line"
    done
    echo "A refused permit of a full $FULL_PERMITS-permit semaphore against an exclusive acquire (grant, random names; target: <= 4):"
    for t in "${COMPARE_TARGETS[@]}"; do
        echo "  $t: refusal $(cmp_val semfull 4 redis_us_per_op "$t") us ($(cmp_val semfull 4 conflicts_per_s "$t") 409/s; per round sent, whatever its answer: $(cmp_val semfull 4 redis_us_per_round "$t") us), acquire $(cmp_val acquire "$h" redis_us_per_op "$t") us: $(ratio "$(cmp_val semfull 4 redis_us_per_round "$t")" "$(cmp_val acquire "$h" redis_us_per_op "$t")")x per round; $(cmp_val semfull 4 redis_calls_per_op "$t") commands in $(cmp_val semfull 4 script_calls_per_op "$t") script calls per 409"
    done
    echo "A hot name (no-wait clients on one name): grants/s at 64 and 256 against 8 (target: >= 0.5); 409s answered without the masters (held_local/s over 409/s)"
    for t in "${COMPARE_TARGETS[@]}"; do
        local g8 g64 g256
        g8=$(cmp_val hot 8 grants_per_s "$t"); g64=$(cmp_val hot 64 grants_per_s "$t"); g256=$(cmp_val hot 256 grants_per_s "$t")
        echo "  $t: grants/s $g8 / $g64 / $g256 (64: $(ratio "$g64" "$g8"), 256: $(ratio "$g256" "$g8")); local 409s at 64: $(ratio "$(cmp_val hot 64 held_local_per_s "$t")" "$(cmp_val hot 64 conflicts_per_s "$t")")"
    done
    echo
    echo "Commands per op (all masters; median of the runs):"
    for spec in "${POINTS[@]}"; do
        IFS='|' read -r t point conns _ <<<"$spec"
        [[ $t == base && ($point != cycle || $conns == "$h") && ($point != hot || $conns == 64) ]] || continue
        for t in "${COMPARE_TARGETS[@]}"; do
            printf '  %-10s c=%-4s %-8s %s\n' "$point" "$conns" "$t" "$(cmd_breakdown "$t" "$point" "$conns")"
        done
    done
    echo
    echo "Redis CPU per op over base's, run by run (each pair minutes apart at most):"
    for spec in "${POINTS[@]}"; do
        IFS='|' read -r t point conns _ <<<"$spec"
        [[ $t == base ]] || continue
        line=""
        for t in "${COMPARE_TARGETS[@]:1}"; do line+="  $t: $(cmp_val "$point" "$conns" redis_us_per_op "$t" ratios)"; done
        echo "  $point c=$conns:$line"
    done
    if [[ -f $OUT/ceiling-compare.tsv ]] && (($(wc -l <"$OUT/ceiling-compare.tsv") > 1)); then
        echo
        echo "raw-Redis ceiling, each build's own scripts without the service (redis-benchmark, $COMPARE_CEIL_N operations of each kind per master, after each target run on its masters; medians):"
        awk -F'\t' '
            function med(a, n,   i, j, x) {
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
                return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
            }
            NR > 1 { k = $2; if (!(k in n)) order[++nk] = k; n[k]++; pc[k, n[k]] = $3; pu[k, n[k]] = $4; bc[k, n[k]] = $5; bu[k, n[k]] = $6; sh[k] = $7 }
            END {
                for (o = 1; o <= nk; o++) {
                    k = order[o]
                    for (i = 1; i <= n[k]; i++) { a1[i] = pc[k, i]; a2[i] = pu[k, i]; a3[i] = bc[k, i]; a4[i] = bu[k, i] }
                    printf "  %-10s (%s shape) pipelined (-P 32) %.0f cycles/s %.1f us/cycle; batched (8 per call) %.0f cycles/s %.1f us/cycle\n", k, sh[k], med(a1, n[k]), med(a2, n[k]), med(a3, n[k]), med(a4, n[k])
                }
            }' "$OUT/ceiling-compare.tsv"
    fi
    local det
    det=$(awk -F'\t' 'NR > 1 && $NF != "" { printf "  %s %s c=%s: %s\n", $1, $2, $3, $NF }' "$OUT/summary.tsv")
    if [[ -n $det ]]; then printf 'errors by kind (all runs):\n%s\n' "$det"; fi
    det=$(awk -F'\t' 'NR > 1 && $3 > 0 { printf "  run %s %s: %s\n", $1, $2, $3 }' "$OUT/masters.tsv")
    if [[ -n $det ]]; then printf 'error replies from the masters:\n%s\n' "$det"; fi
    line=""
    for t in "${COMPARE_TARGETS[@]}"; do
        line+="  $t: handoff $(col safety "$t" handoff "$h")"
        for c in ${BENCH_HOT_NAME_CONNS:-8 64 256}; do line+=", hot c=$c $(col safety "$t" hot "$c")"; done
        line+=$'\n'
    done
    printf 'safety (one name, all runs):\n%s' "$line"
    echo "results: $OUT/compare.tsv (every figure, run by run), summary.tsv, raw/"
}

case $WHAT in
service) bench_service ;;
compare) bench_compare ;;
peers) bench_peers ;;
waiters)
    bench_waiters
    exit 0
    ;;
soak)
    bench_soak
    exit 0
    ;;
park)
    bench_park
    exit 0
    ;;
esac
plot "$OUT" || note "plot failed"
