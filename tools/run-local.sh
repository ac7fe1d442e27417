#!/bin/sh
# run-local.sh -- `make run`: five local Redis masters on 127.0.0.1:7001-7005 (AOF on,
# data under ./run/) and bin/redlockd in the foreground.  Ctrl-C stops all of them.
# Extra arguments go to redlockd (e.g. --listen 127.0.0.1:9090).
#
# Each start is a new cluster: ./run/ is emptied first.  Restarting the same masters
# would be a restart of every master at once, which redlockd answers as it must in
# production -- every master sits out its delayed restart (the max ttl, an hour by
# default; docs/DESIGN.md) -- and that is no way to start a demo.
set -eu
RUN_DIR=${RUN_DIR:-run}
PORTS="7001 7002 7003 7004 7005"
mkdir -p "$RUN_DIR"
pids=""
cleanup() {
  trap - INT TERM EXIT
  [ -n "${svc:-}" ] && kill "$svc" 2>/dev/null && wait "$svc" 2>/dev/null
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 0' INT TERM

for port in $PORTS; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "run-local: something already answers on 127.0.0.1:$port; stop it first" >&2
    exit 1
  fi
  rm -rf "${RUN_DIR:?}/$port"
  mkdir -p "$RUN_DIR/$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$RUN_DIR/$port" \
    --appendonly yes --appendfsync everysec --save '' \
    --maxmemory-policy noeviction --protected-mode yes \
    --logfile "redis.log" --daemonize no &
  pids="$pids $!"
done
for port in $PORTS; do
  i=0
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "run-local: redis on $port did not start (see $RUN_DIR/$port/redis.log)" >&2; exit 1; }
    sleep 0.05
  done
done
echo "run-local: new masters on 127.0.0.1:7001-7005 (data in $RUN_DIR/), starting redlockd; Ctrl-C stops all" >&2
bin/redlockd "$@" &
svc=$!
wait "$svc"
