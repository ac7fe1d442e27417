#!/bin/sh
# install-deps.sh -- install the Debian packages that building and testing need.
# Runs apt-get only for what is missing, and only as root; otherwise it prints the
# command to run.  Used by `make test` (and `make deps`).  prometheus is there for promtool
# (make metrics-check); where systemd runs, its package also starts a Prometheus server on
# :9090 (`systemctl disable --now prometheus` if unwanted).
set -eu
PKGS="build-essential pkg-config libmicrohttpd-dev libjansson-dev libhiredis-dev
libcriterion-dev libcurl4-openssl-dev redis-server redis-tools clang libclang-rt-14-dev
valgrind curl python3 python3-venv python3-pip spin golang-go prometheus openssl"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js and npm (API document lint and schema checks) may come from elsewhere:
# only ask Debian for them when the commands are absent.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages:$missing" >&2
  echo "run as root: apt-get update && apt-get install -y$missing" >&2
  exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# Another apt may hold the lock for a while on a fresh machine: retry.
i=0
until apt-get install -y --no-install-recommends $missing >/tmp/redlockd-apt.log 2>&1; do
  i=$((i + 1))
  [ $i -ge 2 ] && apt-get update >>/tmp/redlockd-apt.log 2>&1 || true
  if [ $i -ge 8 ]; then cat /tmp/redlockd-apt.log >&2; exit 1; fi
  sleep 10
done
