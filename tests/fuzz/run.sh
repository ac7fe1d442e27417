#!/bin/sh
# run.sh -- run the libFuzzer targets built by fuzz.mk and print one line per target.
#
#   run.sh fuzz SECONDS BUILD_DIR TARGET...     fuzz each target for SECONDS
#   run.sh regress 0 BUILD_DIR TARGET...        run each file of regressions/<target>/ once
#
# Exits non-zero on the first target that crashes, leaks, trips a sanitizer or times out,
# after printing the end of its log (the full log stays in BUILD_DIR/logs/).
set -u
mode=$1 seconds=$2 dir=$3
shift 3
here=tests/fuzz
mkdir -p "$dir/logs"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

status=0
for t in "$@"; do
  bin=$dir/fuzz_$t
  log=$dir/logs/$t.$mode.log
  if [ "$mode" = regress ]; then
    files=$(find "$here/regressions/$t" -type f ! -name '*.md' 2>/dev/null | sort)
    if [ -z "$files" ]; then
      echo "  REGRESS fuzz_$t: no regression inputs"
      continue
    fi
    n=$(echo "$files" | wc -l)
    # shellcheck disable=SC2086  # one argument per file (the names have no spaces)
    if "$bin" $files >"$log" 2>&1; then
      echo "  REGRESS fuzz_$t: $n inputs replayed, no failure"
    else
      echo "  REGRESS fuzz_$t: FAILED (log: $log)"
      tail -n 40 "$log"
      status=1
    fi
    continue
  fi
  work=$dir/corpus/$t
  mkdir -p "$work" "$here/artifacts/$t"
  dict=
  [ -f "$here/$t.dict" ] && dict="-dict=$here/$t.dict"
  # The first corpus directory receives new inputs; the seeds are only read.
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$here/artifacts/$t/" $dict "$work" "$here/corpus/$t" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "  FUZZ    fuzz_$t: FAILED with status $rc (log: $log, input in $here/artifacts/$t/)"
    tail -n 60 "$log"
    status=1
    break
  fi
  runs=$(stat number_of_executed_units "$log")
  eps=$(stat average_exec_per_sec "$log")
  cov=$(sed -n 's/.*DONE *cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p' "$log" | tail -n 1)
  echo "  FUZZ    fuzz_$t: ${seconds}s, $runs runs, $eps exec/s, $cov"
done
exit $status
