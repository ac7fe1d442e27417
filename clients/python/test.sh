#!/bin/sh
# test.sh -- the Python client's suite, against the stack clients/stack.py started
# (REDLOCK_URL, REDLOCK_TEST_TOKEN, REDLOCK_TEST_MASTER_PIDS/PORTS):
#   python3 clients/stack.py -- clients/python/test.sh
# Installs the package with pip into a throwaway venv (offline: Debian's python3 with its
# setuptools and wheel, --no-build-isolation) and runs tests/ against that installed copy
# (the margins of the issue-29 cases go to stderr as "margin: ..."), then the README's
# examples (their output checked).  $PYTHON overrides the interpreter (it needs venv, pip,
# setuptools and wheel).  Installs nothing outside its temporary directory.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/redlock-py-client.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# pip builds in the source tree (build/, *.egg-info): build a copy instead.
mkdir "$TMP/src"
cp -R "$HERE/pyproject.toml" "$HERE/README.md" "$HERE/redlockd" "$TMP/src/"
"$PYTHON" -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --no-index --no-build-isolation "$TMP/src"
rm -rf "$TMP/src"
cd "$TMP"
# The installed copy, not the source tree, is what the tests import.
"$TMP/venv/bin/python" -c 'import redlockd, sys; p = redlockd.__file__; sys.exit(0 if "/venv/" in p else "imported " + p)'
REDLOCK_OPENAPI="$HERE/../../api/openapi.yaml" \
  "$TMP/venv/bin/python" -m unittest discover -s "$HERE/tests" -t "$HERE/tests" ${UNITTEST_ARGS:--v}
# The README's examples, their output checked.
run_example() {
  REDLOCK_TOKEN=$REDLOCK_TEST_TOKEN "$TMP/venv/bin/python" "$HERE/examples/$1.py" > "$TMP/$1.out"
  cat "$TMP/$1.out"
}
expect() { grep -q "$2" "$TMP/$1.out" || { echo "test.sh: examples/$1.py did not print: $2"; exit 1; }; }
run_example example
expect example '^holding reports, fencing token [0-9]*$'
expect example '^a second acquire: lock_held retry after 10 s$'
expect example "^status: Status(name='reports', held=True, owner='report-job', validity=9"
expect example '^released; held now: False$'
run_example shared
expect shared '^readers: 2 fencing token [0-9]*$'
expect shared '^a writer: lock_held$'
expect shared '^slots \[0, 1\] tokens \[[0-9]*, [0-9]*\]$'
expect shared '^a third permit: lock_held$'
expect shared '^permits=3: permits_mismatch (in use: 2)$'
expect shared '^permits held now: 0$'
expect shared "^a set: {'accounts/17': [0-9]*, 'accounts/42': [0-9]*}$"
run_example election
expect election "^a leads: Leader(name='scheduler', owner='node-a', fencing_token=[0-9]*, validity=2"
expect election "^b leads: Leader(name='scheduler', owner='node-b', fencing_token=[0-9]*, validity=2.*) lost: False$"
expect election '^now: None$'
run_example aio_example
expect aio_example '^holding reports, fencing token [0-9]*$'
expect aio_example '^a second acquire: lock_held$'
expect aio_example '^released; held now: False$'
run_example fencing
expect fencing '^B writes with token [0-9]* -> accepted$'
expect fencing '^A wakes up, writes with token [0-9]* -> refused$'
expect fencing "^entries: \[([0-9]*, \"B's entry\")\]$"
# Other interpreters to check (e.g. PYTHONS=python3.9, the oldest supported), from the
# source tree.
for py in ${PYTHONS:-}; do
  echo "test.sh: the suite under $py"
  PYTHONPATH="$HERE" REDLOCK_OPENAPI="$HERE/../../api/openapi.yaml" \
    "$py" -m unittest discover -s "$HERE/tests" -t "$HERE/tests" ${UNITTEST_ARGS:-}
done
