#!/bin/sh
# fresh-check.sh -- `make fresh-check`: the README's two commands on a bare Debian bookworm
# machine, as a new user meets them (not part of `make test`: it takes a while).
#
#   make fresh-check                  both steps below
#   make fresh-check FRESH_STEPS=run  only `make run`; FRESH_STEPS=test: only `make test`
#
# A minimal bookworm root (`debootstrap --variant=minbase` plus git and make: nothing else)
# is made once from the mirror apt uses here (this machine's sources and its Acquire::Check-*
# settings) and cached in build/fresh/base (delete that directory to make it anew).  Each
# step gets a copy of it (build/fresh/root), chrooted with /proc, /sys, /dev, /dev/pts and
# /dev/shm bound, Debian's standard /etc/hosts (with its `::1 localhost` line), this
# machine's resolv.conf, and this machine's CA certificates with NODE_EXTRA_CA_CERTS (so
# that npm reaches its registry as it does here).  In it, as root, with a clean environment:
#   1. git clone of this repository's HEAD (commit first: the working tree is not used),
#      `make run` on free ports until `curl -X POST` answers 201, then Ctrl-C (SIGINT);
#   2. a new copy, a new clone, `make test`.
# Each step's output goes to build/fresh/STEP.log; what it installed (dpkg, before and
# after) to build/fresh/STEP-installed.txt; the times are printed at the end.
# Root only (debootstrap, mounts, chroot).
set -eu
REPO=$(git rev-parse --show-toplevel)
cd "$REPO"
FRESH_DIR=$REPO/build/fresh
BASE=$FRESH_DIR/base
ROOT=$FRESH_DIR/root
STEPS=${FRESH_STEPS-run test}
RUN_DEADLINE_S=${FRESH_RUN_DEADLINE_S:-1800}

say() { echo "fresh-check: $*"; }
if [ "$(id -u)" != 0 ]; then
  say "needs root (debootstrap, bind mounts, chroot); run: sudo make fresh-check" >&2
  exit 1
fi
for tool in debootstrap curl; do
  if ! command -v $tool >/dev/null 2>&1; then
    say "installing $tool (apt-get install -y $tool)"
    apt-get install -y --no-install-recommends $tool >/dev/null
  fi
done

# The mirror apt uses: the first deb URI of this machine's sources.
mirror=$( (cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*\).*/\1/p';
           cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
             sed -n 's/^deb  *\(\[[^]]*\] *\)\{0,1\}\([^ ]*\) .*/\2/p') | grep -v security | head -1)
[ -n "$mirror" ] || { say "cannot find the mirror in /etc/apt/sources.list*" >&2; exit 1; }

mounted=""
unmount_all() {
  for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
  mounted=""
  return 0
}
# Never remove a tree with something mounted in it (a bound /dev would go with it).
remove_root() {
  if [ -d "$ROOT" ] && grep -q " $(readlink -f "$ROOT")/" /proc/mounts; then
    say "something is still mounted under $ROOT: not removing it" >&2
    grep " $(readlink -f "$ROOT")/" /proc/mounts >&2
    exit 1
  fi
  rm -rf --one-file-system "$ROOT"
}
# Processes whose root is the chroot were started by this script: end them by pid.
kill_chrooted() {
  [ -d "$ROOT" ] || return 0
  real=$(readlink -f "$ROOT")
  for sig in TERM KILL; do
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/root" 2>/dev/null)" = "$real" ] && kill -$sig "${p#/proc/}" 2>/dev/null || true
    done
    if [ $sig = TERM ]; then sleep 2; fi
  done
  return 0
}
cleanup() {
  kill_chrooted
  unmount_all
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -x "$BASE/usr/bin/git" ] || [ ! -x "$BASE/usr/bin/make" ]; then
  rm -rf "$BASE" "$BASE.new"
  mkdir -p "$FRESH_DIR"
  say "debootstrap --variant=minbase --include=git,make bookworm from $mirror (cached in $BASE)"
  t0=$(date +%s)
  debootstrap --variant=minbase --include=git,make bookworm "$BASE.new" "$mirror" \
    > "$FRESH_DIR/debootstrap.log" 2>&1 || { tail -20 "$FRESH_DIR/debootstrap.log" >&2; exit 1; }
  # apt there as here: the same sources (bookworm, -updates, -security) and Acquire::Check-*.
  rm -f "$BASE.new/etc/apt/sources.list"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && cp "$f" "$BASE.new$f"
  done
  apt-config dump | grep '^Acquire::Check-' > "$BASE.new/etc/apt/apt.conf.d/99fresh-check" || true
  apt-get clean -o RootDir="$BASE.new" 2>/dev/null || rm -f "$BASE.new"/var/cache/apt/archives/*.deb
  mv "$BASE.new" "$BASE"
  say "debootstrap took $(( $(date +%s) - t0 )) s"
fi

# A fresh copy of the cached root, set up as a new machine would be.
new_root() {
  kill_chrooted
  unmount_all
  remove_root
  cp -a "$BASE" "$ROOT"
  cat > "$ROOT/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
EOF
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
  ca=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
  mkdir -p "$ROOT/usr/local/share/fresh-check"
  if [ -f "$ca" ]; then cp "$ca" "$ROOT/usr/local/share/fresh-check/host-ca.pem"; fi
  for m in proc sys dev dev/pts dev/shm; do
    mkdir -p "$ROOT/$m"
    mount --bind "/$m" "$ROOT/$m"
    mounted="$ROOT/$m $mounted"
  done
  git clone -q "$REPO" "$ROOT/root/redlockd"
  dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Package}\n' | sort > "$FRESH_DIR/.before"
}
# Run a command in the chroot as a new root login would: a clean environment, and SIGINT
# and SIGQUIT at their defaults (a background job's are ignored, and the CLI's tests send
# SIGINT to commands that would inherit that).
in_root() {
  env --default-signal=INT,QUIT chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NODE_EXTRA_CA_CERTS=/usr/local/share/fresh-check/host-ca.pem \
    sh -c "cd /root/redlockd && $1"
}
installed() { # STEP: the packages the step added
  dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Package}\n' | sort |
    comm -13 "$FRESH_DIR/.before" - > "$FRESH_DIR/$1-installed.txt"
  echo "$(wc -l < "$FRESH_DIR/$1-installed.txt") packages ($FRESH_DIR/$1-installed.txt)"
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $(( 20000 + $$ % 20000 ))
}

summary=""
rc=0
say "repository $REPO at $(git rev-parse --short HEAD) (committed state only)"
for step in $STEPS; do
  case $step in
  run)
    new_root
    port=$(free_port)
    # Five consecutive free ports for the masters.
    mp=$(python3 -c '
import socket, random
for _ in range(200):
    b = random.randrange(20000, 60000)
    try:
        ss = []
        for i in range(5):
            s = socket.socket(); s.bind(("127.0.0.1", b + i)); ss.append(s)
        print(b); break
    except OSError:
        pass')
    say "step run: make run PORT=$port MASTER_PORT=$mp (log: $FRESH_DIR/run.log)"
    t0=$(date +%s)
    # Its own process group, and SIGINT not ignored (a background job's is): Ctrl-C below.
    setsid env --default-signal=INT,QUIT sh -c "$(command -v chroot) '$ROOT' /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      NODE_EXTRA_CA_CERTS=/usr/local/share/fresh-check/host-ca.pem \
      sh -c 'cd /root/redlockd && exec make run PORT=$port MASTER_PORT=$mp'" \
      > "$FRESH_DIR/run.log" 2>&1 < /dev/null &
    runpid=$!
    code=""
    while [ $(( $(date +%s) - t0 )) -lt "$RUN_DEADLINE_S" ]; do
      if ! kill -0 $runpid 2>/dev/null; then break; fi
      if [ -x "$ROOT/usr/bin/curl" ]; then
        code=$(in_root "curl -s -o /dev/null -w '%{http_code}' -X POST 'localhost:$port/locks/fresh-check?ttl_ms=10000'" 2>/dev/null || true)
        [ "$code" = 201 ] && break
      fi
      sleep 1
    done
    t=$(( $(date +%s) - t0 ))
    # Ctrl-C, as a user would: make run stops its masters and the service.
    kill -INT -- -$runpid 2>/dev/null || true
    i=0; while kill -0 $runpid 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
    if [ "$code" = 201 ]; then
      line="make run: a POST answered 201 after $t s; installed $(installed run)"
    else
      line="make run: FAILED (no 201 after $t s; see $FRESH_DIR/run.log)"; rc=1
      tail -30 "$FRESH_DIR/run.log" >&2
    fi
    say "$line"; summary="$summary
  $line"
    ;;
  test)
    new_root
    say "step test: make test (log: $FRESH_DIR/test.log)"
    t0=$(date +%s)
    if in_root "make test" > "$FRESH_DIR/test.log" 2>&1 < /dev/null; then
      line="make test: passed in $(( $(date +%s) - t0 )) s; installed $(installed test)"
    else
      line="make test: FAILED after $(( $(date +%s) - t0 )) s (see $FRESH_DIR/test.log)"; rc=1
      tail -40 "$FRESH_DIR/test.log" >&2
      installed test > /dev/null
    fi
    say "$line"; summary="$summary
  $line"
    ;;
  *) say "unknown step '$step' (run, test)" >&2; exit 2 ;;
  esac
done
say "summary (bookworm minbase + git + make, as root):$summary"
exit $rc
