#!/bin/sh
# install-deps.sh [run|test] -- the Debian packages that running or testing redlockd needs.
#   run   what `make run` needs: the compiler and the libraries' -dev packages (the service
#         and the CLI), redis-server and redis-tools (the local masters), curl (the README's
#         examples)
#   test  what `make test` needs on top (the default): criterion, clang and its sanitizer
#         runtime, valgrind, spin, python3 (venv, pip), golang-go, Node.js and npm, promtool
#         (prometheus), openssl; and, unless the command is there already (from
#         elsewhere), nodejs, npm, docker-compose (compose-check: `docker-compose config`)
#         and kubernetes-client (k8s-check: `kubectl kustomize`)
# Asks apt only for what is missing; as root it runs `apt-get update` first, then
# `apt-get install` and says what it installs; not root, it prints the command to run as
# root and exits 1.  Used by `make run` (run), `make test` and `make deps` (test).
# prometheus is there for promtool; where systemd runs, its package also starts a
# Prometheus server on :9090 (`systemctl disable --now prometheus` if unwanted).
set -eu
what=${1:-test}
RUN_PKGS="build-essential pkg-config libmicrohttpd-dev libjansson-dev libhiredis-dev
libcurl4-openssl-dev redis-server redis-tools curl"
TEST_PKGS="libcriterion-dev clang libclang-rt-14-dev valgrind python3 python3-venv python3-pip
spin golang-go prometheus openssl"
# Commands that may come from elsewhere: Debian's package is asked for only when the
# command is absent (command:package).
TEST_CMDS="node:nodejs npm:npm docker-compose:docker-compose kubectl:kubernetes-client"
case $what in
  run) PKGS=$RUN_PKGS ;;
  test) PKGS="$RUN_PKGS $TEST_PKGS" ;;
  --list) echo $RUN_PKGS $TEST_PKGS nodejs npm docker-compose kubernetes-client; exit 0 ;;
  *) echo "usage: $0 [run|test|--list]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ "$what" = test ]; then
  for cp in $TEST_CMDS; do
    command -v "${cp%%:*}" >/dev/null 2>&1 || missing="$missing ${cp#*:}"
  done
fi
[ -z "$missing" ] && exit 0
cmd="apt-get update && apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: make $what needs these Debian packages:$missing" >&2
  echo "install-deps: run as root, then make $what again:" >&2
  echo "  $cmd" >&2
  exit 1
fi
log=${TMPDIR:-/tmp}/redlockd-apt.log
echo "install-deps: for make $what, installing:$missing"
echo "install-deps: apt-get update (log: $log)"
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)
before=$(mktemp "${TMPDIR:-/tmp}/redlockd-dpkg.XXXXXX")
trap 'rm -f "$before"' EXIT
dpkg-query -W -f='${Package}\n' 2>/dev/null | sort > "$before"
# Another apt (a fresh machine's own updates) may hold the lock for a while: retry that.
apt_retry() {
  i=0
  until "$@" >>"$log" 2>&1; do
    i=$((i + 1))
    if [ $i -ge 12 ] || ! grep -q -i 'lock' "$log"; then
      tail -20 "$log" >&2
      echo "install-deps: '$*' failed (log: $log)" >&2
      exit 1
    fi
    echo "install-deps: apt is busy (another apt holds its lock); retrying in 5 s" >&2
    sleep 5
  done
}
: > "$log"
apt_retry apt-get update
echo "install-deps: apt-get install -y --no-install-recommends$missing"
apt_retry apt-get install -y --no-install-recommends $missing
added=$(dpkg-query -W -f='${Package}\n' 2>/dev/null | sort | comm -13 "$before" -)
echo "install-deps: installed $(printf '%s\n' "$added" | grep -c .) packages (with their dependencies) in $(( $(date +%s) - t0 )) s:"
printf '%s\n' "$added" | tr '\n' ' ' | fold -s -w 96 | sed 's/^/  /'
echo
