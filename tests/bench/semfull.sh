#!/usr/bin/env bash
# semfull.sh PRINTSCRIPT: what a refused permit of a full 1024-permit semaphore costs one
# master against an exclusive acquire of a free name, each by EVALSHA of the scripts
# PRINTSCRIPT prints (build it against a tree: cc -Iservice tests/bench/printscript.c
# service/scripts.c); usec per call from INFO commandstats, N (300) of each on one fresh
# redis-server on 127.0.0.1, stopped by its PID.  A ratio within one run is the figure.
PS=$1; N=${N:-300}; T=$(mktemp -d)
P=$((20000 + RANDOM % 10000))
redis-server --port $P --save '' --appendonly no > /dev/null 2>&1 & RP=$!
for i in $(seq 50); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.1; done
R="redis-cli -p $P"
$R HSET redlock:#master cluster c run r1 base 0 nb 0 >/dev/null
u=$(( $($R TIME | head -1) * 1000 + 600000 ))
{ echo "SET redlock:#sem:s 1024 PX 600000"; for i in $(seq 0 1023); do echo "SET redlock:#sem:s#$i fill$i PX 600000"; echo "ZADD redlock:#sem:s#h $u $i"; done; echo "PEXPIRE redlock:#sem:s#h 600000"; } | $R >/dev/null
SEM=$($R SCRIPT LOAD "$($PS sem-acquire)"); ACQ=$($R SCRIPT LOAD "$($PS acquire)")
$R CONFIG RESETSTAT >/dev/null
for i in $(seq $N); do echo "EVALSHA $SEM 3 redlock:#master redlock:#sem:s#$((i % 1024)) redlock:#sem:s \"\" b7 LEASE$i 30000 chan o 1024 $((i % 1024)) redlock:#sem:s# 0"; done | $R > "$T/semfull.out"
sem=$($R INFO commandstats | grep evalsha | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
$R CONFIG RESETSTAT >/dev/null
for i in $(seq $N); do echo "EVALSHA $ACQ 4 redlock:#master redlock:k$i redlock:#r:k$i redlock:#w:k$i \"\" b$i LEASE$i 30000 chan o 0 0"; done | $R > "$T/acq.out"
acq=$($R INFO commandstats | grep evalsha | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
echo "refusal $sem us, acquire $acq us, ratio $(echo "$sem / $acq" | bc -l | cut -c1-5); first replies: $(head -4 "$T/semfull.out" | tr '\n' ' ') / $(head -2 "$T/acq.out" | tr '\n' ' ')"
kill $RP; wait $RP 2>/dev/null
rm -rf "$T"
