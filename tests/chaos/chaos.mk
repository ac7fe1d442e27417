# tests/chaos/chaos.mk -- the safety checker under faults (issue 4, part 1).
#
#   make chaos-selftest        the judge on synthetic histories + the fault proxy (seconds)
#   make chaos-short           30 s of faults against $(BINDIR)/redlockd; `make test-all` runs it
#   make chaos-short-tls       the same with the masters over TLS (--tls); `make test-all` runs it
#   make chaos DURATION=600    the long run (default 600 s), data-loss faults always on
#   make chaos-scenarios       directed scenarios: empty-held, aof-cut-held, flushall-held
#                              (each with its positive control), counter-loss
#   make chaos-clock           directed: clock-jump-held (below)
#   CHAOS_ARGS='--seed N --keep ...' passes more options (see `chaos --help`).
#
# Every random run has two service instances, compound faults (a minority forgetting while
# others lag, freeze or are down, the second instance frozen or quiet), lag, hdel_counter
# and restore_old, stopped streamed holders (client processes, SIGSTOP; against a service
# with duplex holds), and a sampler of what every master holds, for the verdicts (l) "nothing
# held by nobody", (m) "a stopped streamed holder lets go" and (n) "within the assumptions".
#
# Data-loss faults (kill_restart_empty, aof_cut: restart with the last writes cut off the
# AOF, flushall: FLUSHALL while the master runs) are in chaos-short only if the service has
# --quarantine-ms (otherwise a double grant through such a master is expected, not a
# regression).  Cold names (a rarely used name whose counter a master lost) are in every
# run since the service repairs counters before such a master rejoins; `make
# chaos-scenarios` (counter-loss) is the deterministic gate for that.  `make chaos` always
# deals data-loss faults and reports whatever it finds.  The checker passes
# --quarantine-ms = --max-ttl-ms (1000, the clients' longest ttl) and, if the service has
# it, --retention-ms = 2 x max ttl; never --trust-fsync-always (the delay is under test).
# In a SANITIZER build the checkers are instrumented like the service, and the resource
# verdict (f) goes by the service binary: under AddressSanitizer it judges leaks by
# LeakSanitizer's report at exit, not RSS growth (the quarantine); see README.md.
# make test runs the checker's self-test; make test-all (TEST_MORE, tests/tests.mk) the runs.
TEST_EXTRA += chaos-selftest
TEST_MORE += chaos-scenarios chaos-short chaos-short-tls

CHAOS_DIR := $(BUILD)/chaos
CHAOS_CFLAGS = $(BASE_CFLAGS) $(SAN_FLAGS) $(shell pkg-config --cflags jansson 2>/dev/null) -Itests/chaos -Itests/clock $(CFLAGS)
CHAOS_LDFLAGS = $(BASE_LDFLAGS) $(SAN_FLAGS) $(LDFLAGS)
CHAOS_LIBS = $(or $(shell pkg-config --libs jansson 2>/dev/null),-ljansson)
CHAOS_COMMON := $(CHAOS_DIR)/judge.o $(CHAOS_DIR)/http.o $(CHAOS_DIR)/procs.o $(CHAOS_DIR)/schedstat.o \
                $(CHAOS_DIR)/sampler.o
CHAOS_BINS := $(CHAOS_DIR)/chaos $(CHAOS_DIR)/faultproxy $(CHAOS_DIR)/chaos_selftest $(CHAOS_DIR)/chaos_holder
CHAOS_RUN = $(CHAOS_DIR)/chaos --service $(BINDIR)/redlockd

$(CHAOS_DIR)/%.o: tests/chaos/%.c
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(CHAOS_CFLAGS) -MMD -MP -c $< -o $@

$(CHAOS_DIR)/faultproxy: $(CHAOS_DIR)/faultproxy.o
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS)

# A client process that holds a lock with hold=stream, for the stopped holders of (m).
$(CHAOS_DIR)/chaos_holder: $(CHAOS_DIR)/holder.o
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS) $(CHAOS_LIBS)

$(CHAOS_DIR)/chaos: $(CHAOS_DIR)/chaos.o $(CHAOS_COMMON)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS) $(CHAOS_LIBS)

$(CHAOS_DIR)/chaos_selftest: $(CHAOS_DIR)/selftest.o $(CHAOS_COMMON)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS) $(CHAOS_LIBS)

-include $(wildcard $(CHAOS_DIR)/*.d)

.PHONY: chaos chaos-short chaos-short-tls chaos-selftest chaos-build chaos-scenarios
chaos-build: $(CHAOS_BINS)

chaos-selftest: $(CHAOS_BINS)
	$(CHAOS_DIR)/chaos_selftest --proxy $(CHAOS_DIR)/faultproxy

chaos-short: $(BINDIR)/redlockd $(CHAOS_BINS)
	$(CHAOS_RUN) --duration 30 --data-loss auto $(CHAOS_ARGS)

# The same with the masters over TLS (rediss://, the fault proxy relaying the TLS bytes).
chaos-short-tls: $(BINDIR)/redlockd $(CHAOS_BINS)
	$(CHAOS_RUN) --duration 30 --data-loss auto --tls $(CHAOS_ARGS)

chaos: $(BINDIR)/redlockd $(CHAOS_BINS)
	$(CHAOS_RUN) --duration $(or $(DURATION),600) --data-loss on $(CHAOS_ARGS)

# Directed scenarios (seconds each), all run, then the target fails if any did.
# empty-held, aof-cut-held, flushall-held: a lock held on exactly 3 of 5 masters, one of
# which then restarts empty / restarts with its last writes cut off its AOF / is wiped by
# FLUSHALL; a rival must not get the lock (aof-cut-held restarts it just before a
# wall-clock second turns, where Redis's uptime_in_seconds overstates the uptime by ~1 s).
# Each has a positive control with the
# quarantine switched off (--quarantine-ms 0) in which the checker must find the double
# grant (property (a)), or it is blind; the log then says "double grant caught, as it must
# be", and the control's own report (its FAIL (a)) stays in $(CHAOS_DIR)/control-*.out.
# counter-loss must hold (fencing counters survive masters losing their data one at a time).
CHAOS_SCENARIOS_HELD := empty-held aof-cut-held flushall-held
CHAOS_CONTROL_ARGS ?= --service-arg --quarantine-ms --service-arg 0

chaos-scenarios: $(BINDIR)/redlockd $(CHAOS_BINS)
	@bad=""; \
	for sc in $(CHAOS_SCENARIOS_HELD); do \
	    $(CHAOS_RUN) --scenario $$sc $(CHAOS_ARGS) || bad="$$bad $$sc"; \
	    $(CHAOS_RUN) --scenario $$sc $(CHAOS_CONTROL_ARGS) --discard $(CHAOS_ARGS) \
	        > $(CHAOS_DIR)/control-$$sc.out 2>&1; rc=$$?; \
	    if [ $$rc -eq 1 ] && grep -q 'FAIL (a)' $(CHAOS_DIR)/control-$$sc.out; then \
	        echo "chaos: control: $$sc with $(strip $(subst --service-arg,,$(CHAOS_CONTROL_ARGS))) (quarantine off): double grant caught, as it must be"; \
	    else \
	        grep -E 'scenario|\(a\)|RESULT|HARNESS' $(CHAOS_DIR)/control-$$sc.out; \
	        echo "chaos: control: $$sc with the quarantine off: the double grant was NOT caught (exit $$rc): the checker is blind (output: $(CHAOS_DIR)/control-$$sc.out)"; \
	        bad="$$bad $$sc-control"; fi; \
	done; \
	$(CHAOS_RUN) --scenario counter-loss $(CHAOS_ARGS) || bad="$$bad counter-loss"; \
	if [ -n "$$bad" ]; then echo "chaos-scenarios: FAILED:$$bad"; exit 1; fi; echo "chaos-scenarios: all held"

# Clock faults (issue 28): masters under tests/clock's shim.  The clock-jump-held scenario
# holds a lock on exactly masters 0..2, then moves the wall clocks of masters 0 and 1 an
# hour forward (their keys expire at once) while a rival asks.  A service with a clock
# check (its --help lists a --...clock... option) must keep the rival out; one without is
# the positive control: the checker must find the double grant, and the line then says
# "double grant caught, as it must be" (its report stays in control-clock-jump-held.out).
# CHAOS_CLOCK_CONTROL_ARGS: the service flags that switch the check off, for the control
# once the check exists (--clock-check 0).
TEST_MORE += chaos-clock
.PHONY: chaos-clock
CHAOS_CLOCK_CONTROL_ARGS ?= --service-arg --clock-check --service-arg 0
CLOCKSHIM_SO ?= build/clock/clockshim.so
chaos-short chaos-short-tls chaos chaos-scenarios chaos-clock: $(CLOCKSHIM_SO) $(CHAOS_DIR)/chaos_holder

chaos-clock: $(BINDIR)/redlockd $(CHAOS_BINS)
	@if [ "$$($(CHAOS_RUN) --has-clock-check)" = yes ]; then \
	    $(CHAOS_RUN) --scenario clock-jump-held $(CHAOS_ARGS) || exit 1; \
	    if [ -z "$(strip $(CHAOS_CLOCK_CONTROL_ARGS))" ]; then \
	        echo "chaos: control: clock-jump-held: no CHAOS_CLOCK_CONTROL_ARGS to switch the clock check off: not run"; exit 0; fi; \
	    $(CHAOS_RUN) --scenario clock-jump-held --expect-double-grant $(CHAOS_CLOCK_CONTROL_ARGS) --discard $(CHAOS_ARGS) \
	        > $(CHAOS_DIR)/control-clock-jump-held.out 2>&1; rc=$$?; \
	else \
	    $(CHAOS_RUN) --scenario clock-jump-held --expect-double-grant --discard $(CHAOS_ARGS) \
	        > $(CHAOS_DIR)/control-clock-jump-held.out 2>&1; rc=$$?; \
	fi; \
	grep -E '^chaos: control:' $(CHAOS_DIR)/control-clock-jump-held.out; \
	if [ $$rc -ne 0 ]; then grep -E 'scenario|\(a\)|RESULT|HARNESS' $(CHAOS_DIR)/control-clock-jump-held.out; \
	    echo "chaos: control: clock-jump-held: see $(CHAOS_DIR)/control-clock-jump-held.out"; exit 1; fi
