# tests/chaos/chaos.mk -- the safety checker under faults (issue 4, part 1).
#
#   make chaos-selftest        the judge on synthetic histories + the fault proxy (seconds)
#   make chaos-short           30 s of faults against $(BINDIR)/redlockd; `make test` runs it
#   make chaos DURATION=600    the long run (default 600 s), empty restarts always on
#   make chaos-scenarios       directed scenarios: empty-held, its positive control, counter-loss
#   CHAOS_ARGS='--seed N --keep ...' passes more options (see `chaos --help`).
#
# chaos-short restarts masters empty only if the service has --quarantine-ms (otherwise a
# double grant through an emptied master is expected, not a regression).  Cold names (a
# rarely used name whose counter a restarted master lost) are in every run since the
# service repairs counters before such a master rejoins; `make chaos-scenarios`
# (counter-loss) is the deterministic gate for that.  `make chaos` always restarts masters
# empty and reports whatever it finds.
TEST_EXTRA += chaos-selftest chaos-scenarios chaos-short

CHAOS_DIR := $(BUILD)/chaos
CHAOS_CFLAGS = $(BASE_CFLAGS) $(SAN_FLAGS) $(shell pkg-config --cflags jansson 2>/dev/null) -Itests/chaos $(CFLAGS)
CHAOS_LDFLAGS = $(BASE_LDFLAGS) $(SAN_FLAGS) $(LDFLAGS)
CHAOS_LIBS = $(or $(shell pkg-config --libs jansson 2>/dev/null),-ljansson)
CHAOS_COMMON := $(CHAOS_DIR)/judge.o $(CHAOS_DIR)/http.o $(CHAOS_DIR)/procs.o $(CHAOS_DIR)/schedstat.o
CHAOS_BINS := $(CHAOS_DIR)/chaos $(CHAOS_DIR)/faultproxy $(CHAOS_DIR)/chaos_selftest
CHAOS_RUN = $(CHAOS_DIR)/chaos --service $(BINDIR)/redlockd

$(CHAOS_DIR)/%.o: tests/chaos/%.c
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(CHAOS_CFLAGS) -MMD -MP -c $< -o $@

$(CHAOS_DIR)/faultproxy: $(CHAOS_DIR)/faultproxy.o
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS)

$(CHAOS_DIR)/chaos: $(CHAOS_DIR)/chaos.o $(CHAOS_COMMON)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS) $(CHAOS_LIBS)

$(CHAOS_DIR)/chaos_selftest: $(CHAOS_DIR)/selftest.o $(CHAOS_COMMON)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $^ -o $@ $(CHAOS_LDFLAGS) $(CHAOS_LIBS)

-include $(wildcard $(CHAOS_DIR)/*.d)

.PHONY: chaos chaos-short chaos-selftest chaos-build chaos-scenarios
chaos-build: $(CHAOS_BINS)

chaos-selftest: $(CHAOS_BINS)
	$(CHAOS_DIR)/chaos_selftest --proxy $(CHAOS_DIR)/faultproxy

chaos-short: $(BINDIR)/redlockd $(CHAOS_BINS)
	$(CHAOS_RUN) --duration 30 --empty-restarts auto $(CHAOS_ARGS)

chaos: $(BINDIR)/redlockd $(CHAOS_BINS)
	$(CHAOS_RUN) --duration $(or $(DURATION),600) --empty-restarts on $(CHAOS_ARGS)

# Directed scenarios (seconds each), all run, then the target fails if any did:
# empty-held must hold; the same with the quarantine switched off is the positive control
# and must FAIL (a), or the checker is blind; counter-loss must hold (fencing counters
# survive masters losing their data one at a time).
chaos-scenarios: $(BINDIR)/redlockd $(CHAOS_BINS)
	@bad=""; \
	$(CHAOS_RUN) --scenario empty-held $(CHAOS_ARGS) || bad="$$bad empty-held"; \
	echo "chaos: positive control: empty-held with --quarantine-ms 0 must FAIL (a)"; \
	$(CHAOS_RUN) --scenario empty-held --service-arg --quarantine-ms --service-arg 0 --discard $(CHAOS_ARGS) \
	    > $(CHAOS_DIR)/control.out 2>&1; rc=$$?; grep -E 'scenario|\(a\)|RESULT' $(CHAOS_DIR)/control.out; \
	if [ $$rc -eq 1 ] && grep -q 'FAIL (a)' $(CHAOS_DIR)/control.out; then \
	    echo "chaos: positive control caught the planted double grant, as it must"; \
	else echo "chaos: positive control did NOT fail (a) (exit $$rc): the checker is blind"; bad="$$bad control"; fi; \
	$(CHAOS_RUN) --scenario counter-loss $(CHAOS_ARGS) || bad="$$bad counter-loss"; \
	if [ -n "$$bad" ]; then echo "chaos-scenarios: FAILED:$$bad"; exit 1; fi; echo "chaos-scenarios: all held"
