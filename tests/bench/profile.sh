#!/usr/bin/env bash
# profile.sh -- where the time of a lock cycle goes (`make bench-profile`).
#
#   profile.sh masters   one redis-server, the scripts exactly as the service sends
#                        them (service/scripts.c through printscript; the shapes of
#                        PROFILE_REFS' builds too): instructions per operation counted
#                        by callgrind (one master under valgrind, the commands fed
#                        pipelined by redis-cli --pipe), split into its parts (the
#                        command itself, EVALSHA, PRELUDE's record check and clock
#                        window, the op, settle), each part's redis.calls, batched and
#                        alone; the same commands timed natively (CPU by the scheduler's
#                        run time) give nanoseconds per instruction
#   profile.sh service   bin/redlockd under load (c=PROFILE_CONNS cycles): perf's
#                        cpu-clock samples by library and function (kernel included;
#                        PROFILE_DWARF=1: DWARF call graphs, for inclusive shares), the
#                        system calls per cycle by kind (perf stat's tracepoints),
#                        and callgrind's instructions per cycle by function
#                        (user space only; the service under valgrind with a long
#                        node timeout, at low load)
#
# Everything listens on 127.0.0.1 and is stopped by PID.  Results in
# build/bench/results/profile-<what>-<stamp>/.  The machine is shared and loaded:
# instruction counts do not depend on the load, times do (say the load with them).
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-masters}
BIN=${BENCH_BIN:-build/bench}
OUT_ROOT=${BENCH_OUT:-build/bench/results}
N=${PROFILE_N:-2000}            # operations per phase
NATIVE_N=${PROFILE_NATIVE_N:-20000}
REDLOCKD=${REDLOCKD:-bin/redlockd}
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$OUT_ROOT/profile-$WHAT-$STAMP
mkdir -p "$OUT"
ln -sfn "$(basename "$OUT")" "$OUT_ROOT/latest-profile-$WHAT"
TMP=$(mktemp -d /tmp/redlockd-profile.XXXXXX)
PIDS=()
note() { echo "profile: $*" >&2; }
die() { note "$*"; exit 1; }
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    local p i
    for ((i = 0; i < 500; i++)); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
    done
    die "no free port"
}
wait_redis() { # PORT PID
    local i
    for ((i = 0; i < 600; i++)); do
        [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# cpu_ns PID: run time of all its threads (ns)
cpu_ns() {
    local t=0 f v
    for f in /proc/"$1"/task/*/schedstat; do
        read -r v _ <"$f" 2>/dev/null || continue
        t=$((t + v))
    done
    echo "$t"
}

# ---------------------------------------------------------------- masters
PFX="p:"
REC="${PFX}#master"
WIN="0:99999999999999" # every clock passes: the script reads TIME as for the service

# gen N ARG...: N commands in RESP, %i in an argument replaced by the command's number
# (from GEN_BASE), %b by its bucket "b<i mod 16384>"
GEN_BASE=0
gen() {
    local n=$1
    shift
    printf '%s\0' "$@" | awk -v n="$n" -v base="$GEN_BASE" 'BEGIN { RS = "\0" } { a[++k] = $0 }
        END {
            for (i = base; i < base + n; i++) {
                printf "*%d\r\n", k
                for (j = 1; j <= k; j++) {
                    s = a[j]; gsub(/%i/, i, s); b = "b" (i % 16384); gsub(/%b/, b, s)
                    printf "$%d\r\n%s\r\n", length(s), s
                }
            }
        }'
}

# the keys and arguments of one op of name k%i, as the service sends them, by shape
acq_args() { # SHAPE -> ARGS (keys count first): acquire
    case $1 in
    shared+window) ARGS=(4 "$REC" "${PFX}k%i" "${PFX}#r:k%i" "${PFX}#w:k%i" "$WIN" %b "lease%ilease%ilease%i" 30000 "${PFX}#released:k%i" origin 0 0) ;;
    shared) ARGS=(4 "$REC" "${PFX}k%i" "${PFX}#r:k%i" "${PFX}#w:k%i" %b "lease%ilease%ilease%i" 30000 "${PFX}#released:k%i" origin 0 0) ;;
    record+bucket+announce) ARGS=(2 "$REC" "${PFX}k%i" %b "lease%ilease%ilease%i" 30000 "${PFX}#released:k%i" origin) ;;
    esac
}
ext_args() { # (the shapes since the extension took four keys)
    ARGS=(5 "$REC" "${PFX}k%i" "${PFX}#set:lease%ilease%ilease%i" "${PFX}#r:k%i" "${PFX}#t:k%i" "$WIN" %b "lease%ilease%ilease%i" 30000)
}
rel_args() {
    case $1 in
    shared+window) ARGS=(4 "$REC" "${PFX}k%i" "${PFX}#r:k%i" "${PFX}#t:k%i" "$WIN" "lease%ilease%ilease%i" "${PFX}#released:k%i" origin) ;;
    shared) ARGS=(4 "$REC" "${PFX}k%i" "${PFX}#r:k%i" "${PFX}#t:k%i" "lease%ilease%ilease%i" "${PFX}#released:k%i" origin) ;;
    record+bucket+announce) ARGS=(2 "$REC" "${PFX}k%i" "lease%ilease%ilease%i" "${PFX}#released:k%i" origin) ;;
    esac
}
# batch8_args SHAPE KIND: 8 ops of names k(8i)..k(8i+7) in one SCRIPT_BATCH call
batch8_args() {
    local shape=$1 kind=$2 j keys=() argv=() lead=()
    [[ $shape == shared+window ]] && lead=("$WIN")
    for ((j = 0; j < 8; j++)); do
        local nm="k%i_$j"
        case $shape:$kind in
        shared*:acquire)
            keys+=("${PFX}$nm" "${PFX}#r:$nm" "${PFX}#w:$nm")
            argv+=(a %b "lease%i${j}lease%i${j}lease" 30000 "${PFX}#released:$nm" origin 0 0) ;;
        shared*:release)
            keys+=("${PFX}$nm" "${PFX}#r:$nm" "${PFX}#t:$nm")
            argv+=(r "lease%i${j}lease%i${j}lease" "${PFX}#released:$nm" origin) ;;
        record+bucket+announce:acquire)
            keys+=("${PFX}$nm")
            argv+=(a %b "lease%i${j}lease%i${j}lease" 30000 "${PFX}#released:$nm" origin) ;;
        record+bucket+announce:release)
            keys+=("${PFX}$nm")
            argv+=(r "lease%i${j}lease%i${j}lease" "${PFX}#released:$nm" origin) ;;
        shared*:extend)
            keys+=("${PFX}$nm" "${PFX}#set:lease%i${j}lease%i${j}lease" "${PFX}#r:$nm" "${PFX}#t:$nm")
            argv+=(e %b "lease%i${j}lease%i${j}lease" 30000) ;;
        esac
    done
    ARGS=($((1 + ${#keys[@]})) "$REC" "${keys[@]}" "${lead[@]}" "${argv[@]}")
}

shape_of() { # SOURCE -> the shape name
    if [[ $1 == *"table.remove(ARGV, 1)"* ]]; then echo shared+window
    elif [[ $1 == *intent* ]]; then echo shared
    else echo record+bucket+announce; fi
}

# the master: its record as the service's steady state has it (16384 bucket counters)
M_PORT=
M_PID=
start_master() { # VALGRIND(0|1)
    M_PORT=$(free_port)
    mkdir -p "$TMP/m$M_PORT"
    local cmd=(redis-server --port "$M_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/m$M_PORT" --logfile "$TMP/m$M_PORT.log")
    if [[ $1 == 1 ]]; then
        valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" --dump-instr=no --compress-strings=no \
            --collect-atstart=yes "${cmd[@]}" 2>"$TMP/valgrind.log" &
    else
        "${cmd[@]}" &
    fi
    M_PID=$!
    PIDS+=("$M_PID")
    wait_redis "$M_PORT" "$M_PID" || die "redis-server did not start ($(tail -3 "$TMP/valgrind.log" 2>/dev/null))"
    redis-cli -p "$M_PORT" eval "for i = 0, 16383 do redis.call('HSET', KEYS[1], 'b' .. i, 1) end
redis.call('HSET', KEYS[1], 'cluster', 'c', 'run', 'r', 'base', 0, 'nb', 16384)" 1 "$REC" >/dev/null
}
stop_master() {
    kill "$M_PID" 2>/dev/null || true
    wait "$M_PID" 2>/dev/null || true
}

# feed FILE: pipe the commands, every reply read (errors counted into FEED_ERRORS)
FEED_ERRORS=0
feed() {
    local out
    out=$(redis-cli -p "$M_PORT" --pipe <"$1" 2>&1)
    FEED_ERRORS=$(sed -n 's/.*errors: \([0-9]*\), replies.*/\1/p' <<<"$out")
    [[ -n $FEED_ERRORS ]] || FEED_ERRORS=?
}

# measure NAME FILE OPS: instructions (callgrind: zero, feed, dump) or CPU ns (native)
# of the commands in FILE, per op
VG=0
declare -A RES_IR RES_NS RES_ERR
measure() {
    local name=$1 f=$2 ops=$3
    if ((VG)); then
        callgrind_control -z "$M_PID" >/dev/null 2>&1
        feed "$f"
        callgrind_control --dump="$name" "$M_PID" >/dev/null 2>&1
        sleep 0.2
        local d ir
        d=$(ls -t "$TMP"/cg."$M_PID".* 2>/dev/null | head -1)
        ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$d")
        RES_IR[$name]=$(awk -v a="${ir:-0}" -v n="$ops" 'BEGIN { printf "%.0f", a / n }')
        cp "$d" "$OUT/callgrind.$name" 2>/dev/null || true
        rm -f "$d"
    else
        local c0 c1
        c0=$(cpu_ns "$M_PID")
        feed "$f"
        c1=$(cpu_ns "$M_PID")
        RES_NS[$name]=$(awk -v a="$c0" -v b="$c1" -v n="$ops" 'BEGIN { printf "%.0f", (b - a) / n }')
    fi
    RES_ERR[$name]=$FEED_ERRORS
}

# sha SOURCE: loaded on the master
sha() { redis-cli -p "$M_PORT" script load "$1"; }

# the phases: every one a file of commands, built once per count of operations
# (names k<BASE + i>: fresh for each phase that writes)
PHASES=()
declare -A PH_FILE PH_OPS PH_DESC
phase() { # NAME OPS DESC (commands in $TMP/ph-NAME.<n>)
    PHASES+=("$1")
    PH_OPS[$1]=$2
    PH_DESC[$1]=$3
}

run_phases() { # COUNT: feed every phase, COUNT commands each (scripts loaded first)
    local n=$1 p f base=0
    for p in "${PHASES[@]}"; do
        f=$TMP/ph-$p.$n
        measure "$p" "$f" "$(awk -v a="${PH_OPS[$p]}" -v n="$n" 'BEGIN { print a * n }')"
    done
}

# build_phases COUNT SOURCE_DIR_LABEL: the command files for this build's scripts
declare -A SRC_ACQ SRC_REL SRC_BATCH
LABELS=()
build_phase_files() { # N
    local n=$1 lbl shape s_acq s_rel s_b pre nos calls
    PHASES=()
    GEN_BASE=0
    # the command alone, and EVALSHA of nothing with the acquire's arguments
    gen "$n" PING >"$TMP/ph-ping.$n"
    phase ping 1 "PING: read, parse, reply of one command"
    for lbl in "${LABELS[@]}"; do
        shape=$(shape_of "${SRC_ACQ[$lbl]}")
        s_acq=$(sha "${SRC_ACQ[$lbl]}")
        s_rel=$(sha "${SRC_REL[$lbl]}")
        s_b=$(sha "${SRC_BATCH[$lbl]}")
        acq_args "$shape"
        local aargs=("${ARGS[@]}")
        rel_args "$shape"
        local rargs=("${ARGS[@]}")
        if [[ $lbl == "${LABELS[0]}" ]]; then
            # the parts, for this build only
            local s_empty s_pre s_prenw s_nos
            s_empty=$(sha "return 0")
            pre=$(awk '/^local f = function/ { exit } { print }' <<<"${SRC_ACQ[$lbl]}")
            s_pre=$(sha "$pre
return 0")
            nos=$(grep -v '^settle()$' <<<"${SRC_ACQ[$lbl]}")
            s_nos=$(sha "$nos")
            GEN_BASE=0
            gen "$n" EVALSHA "$s_empty" "${aargs[@]}" >"$TMP/ph-empty.$n"
            phase empty 1 "EVALSHA of 'return 0' with the acquire's keys and arguments"
            gen "$n" EVALSHA "$s_pre" "${aargs[@]}" >"$TMP/ph-prelude.$n"
            phase prelude 1 "PRELUDE alone (record check, clock window, its functions defined)"
            local nw=("${aargs[@]}")
            [[ $shape == shared+window ]] && nw[5]=""
            gen "$n" EVALSHA "$s_pre" "${nw[@]}" >"$TMP/ph-prelude-nowin.$n"
            phase prelude-nowin 1 "PRELUDE with the window \"\" (no TIME)"
            # one redis.call each, on the keys the acquire touches
            local c
            for c in "HMGET KEYS[1] base q nb" "HLEN KEYS[1]" "TIME" "GET KEYS[2]" "EXISTS KEYS[3]" \
                "SET KEYS[2] ARGV[3] NX PX 30000" "ZREM KEYS[4] x" "PUBLISH ARGV[5] x" "HINCRBY KEYS[1] %b 1" \
                "PTTL KEYS[2]" "HGET KEYS[1] %b"; do
                local words=($c) lua args="" w
                for w in "${words[@]:1}"; do
                    case $w in
                    KEYS*|ARGV*) args+=", $w" ;;
                    %b) args+=", ARGV[2]" ;;
                    *) args+=", '$w'" ;;
                    esac
                done
                lua="redis.call('${words[0]}'$args) return 0"
                local s_c nm
                s_c=$(sha "$lua")
                nm="call-$(tr 'A-Z' 'a-z' <<<"${words[0]}")"
                GEN_BASE=$((GEN_BASE + n))
                gen "$n" EVALSHA "$s_c" "${aargs[@]}" >"$TMP/ph-$nm.$n"
                phase "$nm" 1 "EVALSHA of one redis.call: $c"
            done
            GEN_BASE=$((GEN_BASE + n))
            gen "$n" EVALSHA "$s_nos" "${aargs[@]}" >"$TMP/ph-acquire-nosettle.$n"
            phase acquire-nosettle 1 "acquire alone without settle (a free name)"
        fi
        GEN_BASE=$((GEN_BASE + n))
        gen "$n" EVALSHA "$s_acq" "${aargs[@]}" >"$TMP/ph-$lbl-acquire.$n"
        phase "$lbl-acquire" 1 "$lbl acquire alone (SCRIPT_ACQUIRE, a free name)"
        if [[ $lbl == "${LABELS[0]}" && $shape == shared+window && -n ${SRC_EXT:-} ]]; then
            ext_args
            gen "$n" EVALSHA "$(sha "$SRC_EXT")" "${ARGS[@]}" >"$TMP/ph-$lbl-extend.$n"
            phase "$lbl-extend" 1 "$lbl extension alone (SCRIPT_EXTEND of that grant)"
        fi
        gen "$n" EVALSHA "$s_rel" "${rargs[@]}" >"$TMP/ph-$lbl-release.$n"
        phase "$lbl-release" 1 "$lbl release alone (SCRIPT_RELEASE of that grant)"
        GEN_BASE=$((GEN_BASE + n))
        batch8_args "$shape" acquire
        gen "$((n / 8))" EVALSHA "$s_b" "${ARGS[@]}" >"$TMP/ph-$lbl-b8acquire.$n"
        phase "$lbl-b8acquire" 8 "$lbl acquires, 8 per SCRIPT_BATCH call"
        if [[ $lbl == "${LABELS[0]}" && $shape == shared+window && -n ${SRC_EXT:-} ]]; then
            batch8_args "$shape" extend
            gen "$((n / 8))" EVALSHA "$s_b" "${ARGS[@]}" >"$TMP/ph-$lbl-b8extend.$n"
            phase "$lbl-b8extend" 8 "$lbl extensions, 8 per SCRIPT_BATCH call"
        fi
        batch8_args "$shape" release
        gen "$((n / 8))" EVALSHA "$s_b" "${ARGS[@]}" >"$TMP/ph-$lbl-b8release.$n"
        phase "$lbl-b8release" 8 "$lbl releases, 8 per SCRIPT_BATCH call"
    done
    # the phases' op counts: per command, 1; batched phases' files hold n/8 commands
    local p
    for p in "${PHASES[@]}"; do
        if ((PH_OPS[$p] == 8)); then PH_OPS[$p]=1; fi
    done
}

profile_masters() {
    command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || die "valgrind not found (apt-get install valgrind)"
    local ps=${PRINTSCRIPT:-$BIN/printscript} lbl ref
    [[ -x $ps ]] || die "$ps missing (make bench-loadgen)"
    LABELS=(now)
    SRC_ACQ[now]=$("$ps" acquire)
    SRC_REL[now]=$("$ps" release)
    SRC_BATCH[now]=$("$ps" batch)
    SRC_EXT=$("$ps" extend 2>/dev/null || true)
    for ref in ${PROFILE_REFS:-}; do
        local sha dir
        sha=$(git rev-parse --verify -q "$ref^{commit}") || die "$ref: no such commit"
        dir=$TMP/src-${sha:0:12}
        mkdir -p "$dir"
        git archive --format=tar "$sha" service tests/bench/printscript.c 2>/dev/null | tar -x -C "$dir" ||
            git archive --format=tar "$sha" service | tar -x -C "$dir"
        local pss=$dir/tests/bench/printscript.c
        [[ -f $pss ]] || pss=tests/bench/printscript.c
        "${CC:-cc}" -std=c11 -D_GNU_SOURCE -O2 -I"$dir/service" -o "$dir/printscript" "$pss" "$dir"/service/scripts*.c ||
            die "the scripts of $ref did not build"
        lbl=${ref:0:7}
        LABELS+=("$lbl")
        SRC_ACQ[$lbl]=$("$dir/printscript" acquire)
        SRC_REL[$lbl]=$("$dir/printscript" release)
        SRC_BATCH[$lbl]=$("$dir/printscript" batch)
    done
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(nproc) cores; $(redis-server --version | awk '{ print $1, $2, $3 }'); valgrind $(valgrind --version)"
        echo "builds: now = service/scripts.c of $(git log -1 --format='%h' HEAD)$(git status --porcelain -- service | grep -q . && echo ' + uncommitted changes')$(for l in "${LABELS[@]:1}"; do printf ', %s' "$l"; done)"
        echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    } | tee "$OUT/env.txt"
    # callgrind: instructions
    VG=1
    start_master 1
    build_phase_files "$N"
    note "callgrind: ${#PHASES[@]} phases of $N operations on a redis-server under valgrind"
    run_phases "$N"
    stop_master
    # native: CPU time of the same commands, more of them
    VG=0
    start_master 0
    build_phase_files "$NATIVE_N"
    note "native: ${#PHASES[@]} phases of $NATIVE_N operations"
    run_phases "$NATIVE_N"
    stop_master
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
    # the table: per op, one master
    local p
    printf 'phase\tinstructions_per_op\tnative_ns_per_op\terrors\tdesc\n' >"$OUT/phases.tsv"
    for p in "${PHASES[@]}"; do
        printf '%s\t%s\t%s\t%s\t%s\n' "$p" "${RES_IR[$p]:-}" "${RES_NS[$p]:-}" "${RES_ERR[$p]:-}" "${PH_DESC[$p]}" >>"$OUT/phases.tsv"
    done
    report_masters | tee "$OUT/report.txt"
}

report_masters() {
    local ir ns
    ir() { echo "${RES_IR[$1]:-0}"; }
    ns() { echo "${RES_NS[$1]:-0}"; }
    # ns per instruction, from the whole acquire and release (the bulk of the work)
    local npi
    npi=$(awk -v a="$(ns now-acquire)" -v b="$(ns now-release)" -v c="$(ir now-acquire)" -v d="$(ir now-release)" \
        'BEGIN { if (c + d > 0) printf "%.4f", (a + b) / (c + d); else print 0 }')
    echo
    echo "== one master, per operation: instructions (callgrind) and CPU (native, $NATIVE_N ops per phase); ns per instruction ~ $npi"
    printf '%-20s %12s %10s %8s  %s\n' phase instructions "native_ns" errors what
    local p
    for p in "${PHASES[@]}"; do
        printf '%-20s %12s %10s %8s  %s\n' "$p" "$(ir "$p")" "$(ns "$p")" "${RES_ERR[$p]:-}" "${PH_DESC[$p]}"
    done
    echo
    echo "== the exclusive cycle of this build on one master, in parts (instructions; us at $npi ns each; x5 for five masters)"
    awk -v npi="$npi" -v ping="$(ir ping)" -v empty="$(ir empty)" -v pre="$(ir prelude)" -v prenw="$(ir prelude-nowin)" \
        -v nos="$(ir acquire-nosettle)" -v acq="$(ir now-acquire)" -v rel="$(ir now-release)" \
        -v hm="$(ir call-hmget)" -v hl="$(ir call-hlen)" -v tm="$(ir call-time)" \
        -v ba="$(ir now-b8acquire)" -v br="$(ir now-b8release)" '
        function row(what, i) { printf "  %-58s %8.0f  %6.2f us  %6.2f us x5\n", what, i, i * npi / 1000, 5 * i * npi / 1000 }
        BEGIN {
            row("a command read, parsed, answered (PING)", ping)
            row("EVALSHA itself: arguments, KEYS/ARGV tables, the call", empty - ping)
            row("PRELUDE: HMGET + HLEN of the record (one redis.call each)", (hm - empty) + (hl - empty))
            row("PRELUDE: the clock window (TIME and its parsing)", pre - prenw)
            row("PRELUDE: the rest (table.remove, ~20 closures defined)", prenw - empty - (hm - empty) - (hl - empty))
            row("acquire: the op (FN_ACQUIRE on a free name)", nos - pre)
            row("acquire: settle (PTTL and SET of P#expiry)", acq - nos)
            row("acquire alone, all of it", acq)
            row("release alone, all of it", rel)
            row("release: past EVALSHA and PRELUDE (the op)", rel - pre)
            row("cycle alone (acquire + release)", acq + rel)
            row("cycle batched 8 per call (per op pair)", ba + br)
        }'
    echo "  one redis.call (EVALSHA of one call, less EVALSHA of nothing):"
    local c line=""
    for c in hmget hlen time get exists set zrem publish hincrby pttl hget; do
        line+=" $c $(( $(ir "call-$c") - $(ir empty) ))"
    done
    echo "   $line (instructions)"
    if ((${#LABELS[@]} > 1)); then
        echo
        echo "== per build (instructions per op, one master): acquire / release alone; batched 8 per call"
        local l
        for l in "${LABELS[@]}"; do
            printf '  %-8s %8s / %8s   batched %8s / %8s   cycle alone %8s, batched %8s\n' "$l" "$(ir "$l-acquire")" "$(ir "$l-release")" \
                "$(ir "$l-b8acquire")" "$(ir "$l-b8release")" "$(( $(ir "$l-acquire") + $(ir "$l-release") ))" \
                "$(( $(ir "$l-b8acquire") + $(ir "$l-b8release") ))"
        done
    fi
    echo "callgrind files: $OUT/callgrind.* (callgrind_annotate --inclusive=yes FILE)"
}

# ---------------------------------------------------------------- service
profile_service() {
    local conns=${PROFILE_CONNS:-64} secs=${PROFILE_SECONDS:-10} loadgen=$BIN/loadgen ports=() rpids=() i p
    [[ -x $loadgen ]] || die "$loadgen missing (make bench-loadgen)"
    for ((i = 0; i < 5; i++)); do
        p=$(free_port)
        mkdir -p "$TMP/r$p"
        redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/r$p" --logfile "$TMP/r$p.log" &
        rpids+=($!)
        PIDS+=($!)
        ports+=("$p")
        wait_redis "$p" "$!" || die "redis-server did not start"
    done
    local masters svc spid
    masters=$(printf '127.0.0.1:%s,' "${ports[@]}")
    masters=${masters%,}
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(nproc) cores; $REDLOCKD ($(git log -1 --format='%h' HEAD)$(git status --porcelain -- service | grep -q . && echo ' + uncommitted changes'))"
        echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    } | tee "$OUT/env.txt"
    # 1. perf: cpu-clock samples of the service under c=conns cycles
    svc=$(free_port)
    "$REDLOCKD" --masters "$masters" --listen "127.0.0.1:$svc" --log-level warn >"$TMP/svc.log" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    for ((i = 0; i < 100; i++)); do curl -sf "http://127.0.0.1:$svc/readyz" >/dev/null && break; sleep 0.1; done
    if [[ ${PROFILE_PERF:-1} == 1 ]] && command -v perf >/dev/null; then
        "$loadgen" -p "$svc" -c "$conns" -d $((secs + 2)) -w 1 --json --cpu-pids "svc=$spid" >"$OUT/perf-load.json" &
        local lg=$!
        sleep 2
        local cg=(-g)
        [[ ${PROFILE_DWARF:-0} == 1 ]] && cg=(--call-graph dwarf,16384)
        perf record -e cpu-clock -F 2999 "${cg[@]}" -p "$spid" -o "$TMP/perf.data" -- sleep "$secs" >/dev/null 2>&1 || note "perf record failed"
        wait "$lg" || true
        if [[ -f $TMP/perf.data ]]; then
            perf report -i "$TMP/perf.data" --stdio --no-children --sort dso 2>/dev/null | grep -E '^ +[0-9]' >"$OUT/perf-dso.txt" || true
            perf report -i "$TMP/perf.data" --stdio --no-children --sort dso,sym 2>/dev/null | grep -E '^ +[0-9]' | head -60 >"$OUT/perf-sym.txt" || true
            perf report -i "$TMP/perf.data" --stdio --children --sort sym -g none 2>/dev/null | grep -E '^ +[0-9]' | head -120 >"$OUT/perf-children.txt" || true
        fi
        # the system calls per cycle, by kind (tracepoints: cheap, the load barely moves)
        "$loadgen" -p "$svc" -c "$conns" -d $((secs + 2)) -w 1 --json >"$OUT/syscalls-load.json" &
        lg=$!
        sleep 2
        perf stat -x, -e raw_syscalls:sys_enter $(printf ' -e syscalls:sys_enter_%s' epoll_ctl epoll_wait sendmsg sendto write writev read recvfrom futex) \
            -p "$spid" -- sleep "$secs" 2>"$OUT/syscalls.csv" >/dev/null || note "perf stat failed"
        wait "$lg" || true
    fi
    kill "$spid"
    wait "$spid" 2>/dev/null || true
    # 2. callgrind: instructions per cycle, user space
    svc=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$TMP/svc-cg.%p" --dump-instr=no --compress-strings=no --collect-atstart=yes \
        "$REDLOCKD" --masters "$masters" --listen "127.0.0.1:$svc" --log-level warn --node-timeout-ms 2000 --threads 1 \
        >"$TMP/svc-vg.log" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    for ((i = 0; i < 600; i++)); do curl -sf "http://127.0.0.1:$svc/readyz" >/dev/null && break; sleep 0.1; done
    local cyc=${PROFILE_SERVICE_CYCLES:-4000}
    "$loadgen" -p "$svc" -c 8 -n 200 -d 60 -w 0 --json >/dev/null 2>&1 || true # warm: pools, scripts
    callgrind_control -z "$spid" >/dev/null 2>&1
    "$loadgen" -p "$svc" -c "${PROFILE_CG_CONNS:-8}" -n $((2 * cyc)) -d 600 -w 0 --json >"$OUT/callgrind-load.json" || true
    callgrind_control --dump=cycles "$spid" >/dev/null 2>&1
    sleep 0.5
    local d
    d=$(ls -t "$TMP"/svc-cg."$spid"* 2>/dev/null | grep -v '\.log$' | head -1)
    [[ -n $d ]] && cp "$d" "$OUT/callgrind.service"
    kill "$spid"
    wait "$spid" 2>/dev/null || true
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
    report_service "$cyc" | tee "$OUT/report.txt"
}

report_service() {
    local cyc=$1 done_c total
    echo
    if [[ -f $OUT/perf-load.json ]]; then
        echo "== perf (cpu-clock samples, kernel and user) of bin/redlockd at c=${PROFILE_CONNS:-64}: $(jq -r '"\(.cycles_per_s) cycles/s, service CPU \(.window.cpu_s.svc / .window.secs * 1000 | round / 1000) cores = \(.window.cpu_s.svc / .window.secs * 1e6 / .cycles_per_s | round) us per cycle"' "$OUT/perf-load.json")"
        echo "   by library:"
        sed 's/^/   /' "$OUT/perf-dso.txt" | head -12
        echo "   by function (self):"
        sed 's/^/   /' "$OUT/perf-sym.txt" | head -30
    fi
    if [[ -s $OUT/syscalls.csv && -f $OUT/syscalls-load.json ]]; then
        echo "   system calls per cycle ($(jq -r .cycles_per_s "$OUT/syscalls-load.json") cycles/s):"
        awk -F, -v c="$(jq -r .cycles_per_s "$OUT/syscalls-load.json")" -v s="${PROFILE_SECONDS:-10}" \
            '$1 ~ /^[0-9]+$/ && c > 0 { sub(/^(raw_)?syscalls:sys_enter_?/, "", $3); printf "     %-12s %6.2f\n", ($3 == "" ? "all" : $3), $1 / (c * s) }' "$OUT/syscalls.csv"
    fi
    if [[ -f $OUT/callgrind.service ]]; then
        done_c=$(jq -r '.cycles_per_s * .duration_s | round' "$OUT/callgrind-load.json" 2>/dev/null || echo "$cyc")
        total=$(awk '/^(summary|totals):/ { print $2; exit }' "$OUT/callgrind.service")
        echo
        echo "== callgrind (user space only) of bin/redlockd, $done_c cycles at c=${PROFILE_CG_CONNS:-8}: $((total / (done_c > 0 ? done_c : 1))) instructions per cycle"
        echo "   inclusive, per cycle:"
        callgrind_annotate --inclusive=yes "$OUT/callgrind.service" 2>/dev/null | grep -E '^ *[0-9,]+ ' | head -45 |
            awk -v n="$done_c" '{ v = $1; gsub(/,/, "", v); $1 = ""; printf "   %9.0f %s\n", v / n, $0 }'
        echo "   self, per cycle:"
        callgrind_annotate --inclusive=no --threshold=100 "$OUT/callgrind.service" 2>/dev/null | grep -E '^ *[0-9,]+ ' | grep -v -e 'PROGRAM TOTALS' -e ':clone ' -e ':start_thread ' | head -35 |
            awk -v n="$done_c" '{ v = $1; gsub(/,/, "", v); $1 = ""; printf "   %9.0f %s\n", v / n, $0 }'
    fi
    echo "files: $OUT"
}

case $WHAT in
masters) profile_masters ;;
service) profile_service ;;
*) die "usage: profile.sh masters|service" ;;
esac
