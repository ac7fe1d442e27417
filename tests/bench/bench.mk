# tests/bench/bench.mk -- the benchmark harness (included by the top Makefile).
#
#   make bench          5 throwaway redis-servers + bin/redlockd on loopback:
#                       cycles at c=1,16,64,256, contention, handoff, the HTTP
#                       floor and the raw-Redis ceiling, with service/ceiling
#   make bench-peers    the same cycle load against redlockd, node-redlock behind
#                       Node's http (1 process, cluster of 2) and etcd's lock API,
#                       side by side with the ratios (npm ci on first use)
#   make bench-waiters  BENCH_WAITERS=10000 requests parked on one held name: the
#                       service's RSS and idle CPU while they wait
#   make bench-park     BENCH_PARK_N=10000 duplex streamed holds, one-way holds,
#                       watches, then holds and watches of them at once, each
#                       parked BENCH_PARK_SECONDS=20 on a fresh instance with its
#                       defaults: RSS, descriptors, idle CPU, the masters' load
#   make bench-soak     BENCH_SOAK_SECONDS=600 of c=64 cycles: the service's RSS every
#                       10 s, flat within 5 % of the median after the first minute
#   make bench-compare  two service builds side by side, same points (cycles at
#                       c=1,64,256, contention, handoff): the baseline, built from
#                       BENCH_BASELINE_REF=HEAD~1 into build/bench/baseline-src (or
#                       BENCH_BASELINE=<redlockd binary>), against bin/redlockd;
#                       runs alternate build by build, every target run on fresh
#                       redis-servers; medians and new/base of cycles/s, grants/s,
#                       409/s, acquire p50/p99, Redis CPU per cycle and per 409
#                       (also: BENCH_BASELINE=<binary> make bench)
#   make bench-tls      the same comparison for one build, bin/redlockd: its masters
#                       over TCP (base) against the same masters over TLS (new:
#                       rediss://, verified, with a client certificate), run by run
#                       alternately; the figures of BENCHMARKS.md's TLS section
#   make bench-profile  where a cycle's time goes (tests/bench/profile.sh):
#                       PROFILE_WHAT=masters (callgrind on one redis-server, the
#                       scripts as the service sends them; PROFILE_REFS="<ref>..."
#                       adds those builds' scripts) or PROFILE_WHAT=service
#   make bench-plot     PNG of cycles/s and acquire p99 against concurrency, from
#                       the latest results (bench and bench-peers also plot)
#   make bench-publish  copy the latest results (tables, raw JSON, plot) into
#                       tests/bench/results/, which BENCHMARKS.md points at
#   make bench-loadgen  the tools only: build/bench/{loadgen,httpfloor,printscript}
#   make bench-selftest the load generator's parser and histogram checks
#   make bench-deps     the Debian packages the harness uses
#
# Knobs, from the environment or the make command line:
#   BENCH_SECONDS=4     measured seconds per point      BENCH_WARMUP=1  warm-up seconds
#   BENCH_RUNS=3        runs per point, median reported (runs are interleaved)
#   BENCH_CONNS="1 16 64 256"   BENCH_HOT_CONNS=64 (contention, handoff)
#   BENCH_FLOOR_CONNS=64        BENCH_ACQUIRE_ONLY=0|1   BENCH_MASTERS=5
#   BENCH_REDIS_N=50000 BENCH_REDIS_PIPELINE=32 BENCH_REDIS_CLIENTS=32 (ceiling)
#   BENCH_SERVICE_ARGS="..."    extra redlockd flags     BENCH_LOADGEN_THREADS=1
#   BENCH_OUT=build/bench/results   (each run in <what>-<stamp>/, latest-<what> links)
#   bench-compare: BENCH_BASELINE_REF=HEAD~1 or BENCH_BASELINE=<binary>; BENCH_CONNS
#   defaults to "1 64 256" there; BENCH_COMPARE_CEILING=1 also runs the raw-Redis
#   ceiling with each build's own scripts (BENCH_COMPARE_REDIS_N=10000 operations)
# Every load goes to 127.0.0.1 only and every run is bounded in time.

BENCH_DIR     := build/bench
BENCH_LOADGEN := $(BENCH_DIR)/loadgen
BENCH_FLOOR   := $(BENCH_DIR)/httpfloor
# The ceiling runs the service's own Lua scripts when service/scripts.c exists
# (bench.sh falls back to an approximation otherwise).
BENCH_SCRIPTS := $(if $(wildcard service/scripts.c service/scripts.h),$(BENCH_DIR)/printscript)
BENCH_TOOLS   := $(BENCH_LOADGEN) $(BENCH_FLOOR) $(BENCH_SCRIPTS)
BENCH_CC      ?= $(CC)
BENCH_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -pthread -Wall -Wextra -Werror -Wshadow \
                 -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
BENCH_LDLIBS  := -pthread -lm

BENCH_BASELINE_REF ?= HEAD~1

.PHONY: bench-profile bench bench-compare bench-tls bench-peers bench-waiters bench-park bench-soak bench-plot bench-publish bench-loadgen bench-deps bench-selftest

bench-loadgen: $(BENCH_TOOLS)

$(BENCH_DIR)/printscript: tests/bench/printscript.c $(wildcard service/scripts*.[ch]) service/proto.h tests/bench/bench.mk
	@mkdir -p $(BENCH_DIR)
	$(Q)$(BENCH_CC) $(BENCH_CFLAGS) -Iservice -o $@ tests/bench/printscript.c $(wildcard service/scripts*.c)

$(BENCH_DIR)/%: tests/bench/%.c tests/bench/bench.mk
	@mkdir -p $(BENCH_DIR)
	$(Q)$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $< $(BENCH_LDLIBS)

bench-selftest: $(BENCH_LOADGEN)
	$(Q)$(BENCH_LOADGEN) --self-test

bench: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/bench.sh service

# the baseline is built by bench.sh (git archive + its own make), not by this make
bench-compare: $(BINDIR)/redlockd $(BENCH_LOADGEN) $(BENCH_SCRIPTS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd BENCH_BASELINE_REF='$(BENCH_BASELINE_REF)' \
		tests/bench/bench.sh compare

bench-tls: $(BINDIR)/redlockd $(BENCH_LOADGEN)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd BENCH_COMPARE_TLS=1 tests/bench/bench.sh compare

bench-peers: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/bench.sh peers

bench-waiters: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/bench.sh waiters

bench-park: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/bench.sh park

bench-profile: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/profile.sh $(or $(PROFILE_WHAT),masters)

bench-soak: $(BINDIR)/redlockd $(BENCH_TOOLS)
	$(Q)BENCH_BIN=$(BENCH_DIR) REDLOCKD=$(BINDIR)/redlockd tests/bench/bench.sh soak

bench-plot:
	$(Q)tests/bench/bench.sh plot

bench-publish:
	$(Q)tests/bench/bench.sh publish

bench-deps:
	apt-get install -y redis-server redis-tools gnuplot-nox etcd-server jq
	@# Node.js may come from elsewhere (its own npm then conflicts with Debian's)
	command -v node >/dev/null && command -v npm >/dev/null || apt-get install -y nodejs npm
