# tests/clock/clock.mk -- clockshim.so, an LD_PRELOAD library that moves redis-server's
# wall clock (jumps, steps back, fast or slow rates) from a file; see tests/clock/README.md.
#
#   make clockshim         build/clock/clockshim.so (never instrumented: it goes into
#                          redis-server, whatever SANITIZER says)
#   make clock-selftest    the library against a real redis-server (a few seconds)
#
# Users: the chaos checker's clock faults (tests/chaos), and integration tests, which find
# the library through $(CLOCKSHIM_SO) (exported to them as REDLOCK_TEST_CLOCKSHIM).
TEST_EXTRA += clock-selftest

CLOCKSHIM_SO := build/clock/clockshim.so
export REDLOCK_TEST_CLOCKSHIM := $(abspath $(CLOCKSHIM_SO))

$(CLOCKSHIM_SO): tests/clock/clockshim.c
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  CC      $@")
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -fPIC -shared -fvisibility=hidden -o $@ $<

$(BUILD)/clock/shimtest: tests/clock/shimtest.c tests/clock/clockshim.h tests/chaos/procs.c tests/chaos/procs.h
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(filter-out -MMD -MP,$(BASE_CFLAGS)) $(SAN_FLAGS) -Itests/chaos -Itests/clock -o $@ tests/clock/shimtest.c tests/chaos/procs.c \
	    $(BASE_LDFLAGS) $(SAN_FLAGS)

.PHONY: clockshim clock-selftest
clockshim: $(CLOCKSHIM_SO)

clock-selftest: $(CLOCKSHIM_SO) $(BUILD)/clock/shimtest
	$(BUILD)/clock/shimtest --shim $(CLOCKSHIM_SO)

# Every master of the integration suites runs under the shim (tests/integration/harness.c).
test-integration test-integration-external test-valgrind test-tsan: $(CLOCKSHIM_SO)

# The integration suites' clock tests (tests/integration/test_clock.c) skip themselves
# without the library: build it first, so that they run in every pass of .ci/run (on a
# clean clone, make test's test-integration would otherwise come before any target that
# builds it).
test-integration: $(CLOCKSHIM_SO)
