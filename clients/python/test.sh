#!/bin/sh
# test.sh -- the Python client's suite, against the stack clients/stack.py started
# (REDLOCK_URL, REDLOCK_TEST_TOKEN, REDLOCK_TEST_MASTER_PIDS/PORTS):
#   python3 clients/stack.py -- clients/python/test.sh
# Installs the package with pip into a throwaway venv (offline: Debian's python3 with its
# setuptools and wheel, --no-build-isolation) and runs tests/ against that installed copy,
# then the README's example (its output checked).  $PYTHON overrides the interpreter (it needs venv, pip,
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
REDLOCK_TOKEN=$REDLOCK_TEST_TOKEN "$TMP/venv/bin/python" "$HERE/examples/example.py" > "$TMP/example.out"
cat "$TMP/example.out"
grep -q '^holding reports, fencing token [0-9]*$' "$TMP/example.out"
grep -q '^a second acquire: lock_held retry after 10 s$' "$TMP/example.out"
grep -q '^released; held now: False$' "$TMP/example.out"
REDLOCK_TOKEN=$REDLOCK_TEST_TOKEN "$TMP/venv/bin/python" "$HERE/examples/shared.py" > "$TMP/shared.out"
cat "$TMP/shared.out"
grep -q '^readers: 2 fencing token [0-9]*$' "$TMP/shared.out"
grep -q '^a writer: lock_held$' "$TMP/shared.out"
grep -q '^slots \[0, 1\] tokens \[[0-9]*, [0-9]*\]$' "$TMP/shared.out"
grep -q '^a third permit: lock_held$' "$TMP/shared.out"
grep -q '^permits=3: permits_mismatch (in use: 2)$' "$TMP/shared.out"
grep -q "^SemaphoreStatus(name='pool/db', permits=None, held=0, free=None)$" "$TMP/shared.out"
# Other interpreters to check (e.g. PYTHONS=python3.9, the oldest supported), from the
# source tree.
for py in ${PYTHONS:-}; do
  echo "test.sh: the suite under $py"
  PYTHONPATH="$HERE" REDLOCK_OPENAPI="$HERE/../../api/openapi.yaml" \
    "$py" -m unittest discover -s "$HERE/tests" -t "$HERE/tests" ${UNITTEST_ARGS:-}
done
