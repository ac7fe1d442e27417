#!/bin/sh
# test.sh -- the TypeScript client's whole suite, against the stack clients/stack.py starts
# (REDLOCK_URL, REDLOCK_TEST_TOKEN, REDLOCK_TEST_MASTER_PIDS/PORTS in the environment):
#   python3 clients/stack.py -- clients/typescript/test.sh      (or: make test-clients-typescript)
# Type-checks and builds the library (src/ -> dist/) and the tests (test/, examples/ ->
# build/) with the pinned typescript, then runs each test file with node:test (the ones
# that freeze masters or instances last), then the README's examples.  Installs nothing: the dev dependencies
# come from `npm ci` in this directory (make test-clients runs it).
set -eu
cd "$(dirname "$0")"
if [ ! -x node_modules/.bin/tsc ]; then
  echo "clients/typescript/test.sh: node_modules/ missing: run 'npm ci' in clients/typescript" >&2
  exit 2
fi
: "${REDLOCK_URL:?run me under python3 clients/stack.py -- clients/typescript/test.sh}"

rm -rf dist build
node_modules/.bin/tsc -p tsconfig.json
node_modules/.bin/tsc -p tsconfig.test.json

failed=0
for t in types errors dispose locks hold shared sets election fencing tls loss freeze; do
  # A test that fails while it holds a lock leaves the connection that keeps the process
  # alive: a file gets 5 minutes at most.
  out=$(timeout 300 node --test "build/test/$t.test.js" 2>&1) && rc=0 || rc=$?
  summary=$(printf '%s\n' "$out" | grep -E '^# (tests|pass|fail) ' | sed 's/^# //' | tr '\n' ' ')
  if [ "$rc" != 0 ]; then
    printf '%s\n' "$out"
    echo "typescript: $t.test: FAILED ($summary)"
    failed=1
  else
    echo "typescript: $t.test: $summary"
  fi
  # What a test prints for the record (loss.test's margins).
  printf '%s\n' "$out" | grep -E '^# +(margins|stream|extend|permit)[ ,]' | sed 's/^# */  /' || true
done

# The README's examples, as a user runs them (their output is in the README);
# examples/fencing.mjs needs a redis-server: test/fencing.test.ts runs it.
for ex in examples/quickstart.mjs examples/shared.mjs examples/election.mjs build/examples/await-using.js; do
  if out=$(REDLOCK_TOKEN=$REDLOCK_TEST_TOKEN timeout 60 node $ex 2>&1); then
    printf '%s\n' "$out" | sed 's/^/  /'
    echo "typescript: $ex: ok"
  else
    printf '%s\n' "$out"
    echo "typescript: $ex: FAILED"
    failed=1
  fi
done
exit $failed
