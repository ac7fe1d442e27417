#!/bin/sh
# valgrind.sh -- run the unit tests under valgrind memcheck, every test process included.
#
#   tests/unit/valgrind.sh [BINARY] [criterion options...]     (JOBS=2 by default)
#
# Criterion 2.4 has no --no-fork: each test runs in a fresh copy of the binary that
# the runner re-executes, so valgrind must follow children (--trace-children=yes), and
# the runner's exit status does not reflect errors found in them.  This script keeps
# one log per process and fails if any of them reports an error: invalid accesses,
# uninitialised values, or memory definitely/indirectly lost.  ("Possibly lost" blocks
# are criterion's own, left when a test is skipped.)
set -u
bin=build/default/tests/unit_tests
case "${1:-}" in
  -* | '') ;;
  *) bin=$1; shift ;;
esac
logs=$(mktemp -d /tmp/redlockd-valgrind.XXXXXX)
valgrind --trace-children=yes --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --show-leak-kinds=definite,indirect --log-file="$logs/%p.log" \
  "$bin" --jobs "${JOBS:-2}" "$@"
rc=$?
total=$(ls "$logs" | wc -l)
bad=$(grep -L "ERROR SUMMARY: 0 errors" "$logs"/*.log)
if [ -n "$bad" ]; then
  for f in $bad; do
    echo "---- $f"
    grep -v "^==[0-9]*== *$" "$f" | sed -n '/ERROR SUMMARY\|Invalid\|uninitialised\|lost in loss/,+12p' | head -60
  done
  echo "valgrind: errors in $(echo "$bad" | wc -l) of $total processes (logs in $logs)"
  exit 1
fi
echo "valgrind: $total processes, no errors (runner exit status $rc)"
rm -rf "$logs"
exit $rc
