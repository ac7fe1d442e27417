#!/bin/sh
# run-local.sh -- `make run`: new local Redis masters (AOF on, data under ./run/) and
# bin/redlockd in the foreground.  Ctrl-C stops all of them.  Variables (on make's command
# line, e.g. `make run PORT=9090 MASTERS=3 LOG_FORMAT=text`, or in the environment):
#   PORT=8080          redlockd listens on 127.0.0.1:PORT
#   MASTERS=5          how many masters (any N >= 1; the quorum is N/2+1)
#   MASTER_PORT=7001   the first master's port; the others follow (7001..7005)
#   TOKENS=FILE        a tokens file (--auth-tokens-file; lines `TOKEN [PREFIX] [+admin]
#                      [name=LABEL]`): without it, anyone on this machine may use the locks
#   LOG_FORMAT=json    or text (--log-format)
#   ARGS='...'         any other redlockd flags (`bin/redlockd --help`), given last: they win
#   RUN_DIR=run        where the masters keep their data
# redlockd also reads REDLOCK_* variables from the environment (`bin/redlockd --help`):
# those set in your shell are listed at start; --masters and --listen given here win over
# REDLOCK_MASTERS and REDLOCK_LISTEN.
#
# Each start is a new cluster: the masters' data under $RUN_DIR is emptied first.
# Restarting the same masters would be a restart of every master at once, which redlockd
# answers as it must in production -- every master sits out its delayed restart (the max
# ttl, an hour by default; docs/DESIGN.md) -- and that is no way to start a demo.
set -eu
RUN_DIR=${RUN_DIR:-run}
PORT=${PORT:-8080}
MASTERS=${MASTERS:-5}
MASTER_PORT=${MASTER_PORT:-7001}
TOKENS=${TOKENS:-}
LOG_FORMAT=${LOG_FORMAT:-json}
ARGS=${ARGS:-}
say() { echo "run-local: $*" >&2; }
isnum() { case $1 in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }
isnum "$PORT" && isnum "$MASTERS" && isnum "$MASTER_PORT" && [ "$MASTERS" -ge 1 ] ||
  { say "PORT, MASTERS and MASTER_PORT must be numbers (MASTERS >= 1)"; exit 2; }
[ -z "$TOKENS" ] || [ -r "$TOKENS" ] || { say "TOKENS=$TOKENS: no such readable file"; exit 2; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { say "redis-server and redis-cli are missing (sh tests/install-deps.sh run)"; exit 1; }

ports="" list=""
i=0
while [ $i -lt "$MASTERS" ]; do
  p=$((MASTER_PORT + i))
  ports="$ports $p"
  list="$list${list:+,}127.0.0.1:$p"
  i=$((i + 1))
done
mkdir -p "$RUN_DIR"
pids=""
cleanup() {
  trap - INT TERM EXIT
  if [ -n "${svc:-}" ]; then kill "$svc" 2>/dev/null && wait "$svc" 2>/dev/null; fi
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 0' INT TERM

for port in $ports; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    say "something already answers on 127.0.0.1:$port; stop it first, or MASTER_PORT=..."
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
for port in $ports; do
  i=0
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 200 ] && { say "redis on $port did not start (see $RUN_DIR/$port/redis.log)"; exit 1; }
    sleep 0.05
  done
done

listen=127.0.0.1:$PORT
# A --listen among ARGS wins (the last flag does): say that one.
prev=""
for a in $ARGS; do
  case $a in --listen=*) listen=${a#--listen=} ;; esac
  [ "$prev" = --listen ] && listen=$a
  prev=$a
done
env_seen=$(env | grep '^REDLOCK_' | sed 's/=.*//' | sort | tr '\n' ' ' || true)
say "$MASTERS new masters: $list (data in $RUN_DIR/, emptied at each start)"
say "redlockd on http://$listen, log format $LOG_FORMAT, tokens: ${TOKENS:-none (open to anyone on this machine)}${ARGS:+, more flags: $ARGS}"
if [ -n "$env_seen" ]; then
  say "from your environment redlockd also reads: $env_seen(the flags above win over REDLOCK_MASTERS and REDLOCK_LISTEN)"
fi
say "Ctrl-C stops all"
# shellcheck disable=SC2086 # ARGS is a list of flags
bin/redlockd --masters "$list" --listen "127.0.0.1:$PORT" --log-format "$LOG_FORMAT" \
  ${TOKENS:+--auth-tokens-file "$TOKENS"} $ARGS &
svc=$!
wait "$svc"
