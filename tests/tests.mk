# tests.mk -- unit tests (criterion, pure modules), integration tests (criterion,
# real redis-server processes and the real bin/redlockd over HTTP), and `make test`.

TEST_LIBS := $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_OBJS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%.o,$(UNIT_SRCS))
INTEG_SRCS := $(wildcard tests/integration/*.c)
INTEG_OBJS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%.o,$(INTEG_SRCS))

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/integration -c $< -o $@

# Unit tests link the module objects, never main.o.  test_lockop.c plays the masters:
# the link hands every call of master_eval() and master_eval_op() to its
# __wrap_master_eval(_op) (the other suites get the real ones through them).
$(BUILD)/tests/unit_tests: $(UNIT_OBJS) $(SERVICE_OBJS)
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -Wl,--wrap=master_eval -Wl,--wrap=master_eval_op -o $@ $^ $(PKG_LIBS) $(TEST_LIBS) -lm

# The live script checks (test_scripts_live.c) send the scripts' sources by hand
# (service/scripts.c and the script modules scripts_*.c).
$(BUILD)/tests/integration_tests: $(INTEG_OBJS) $(filter $(BUILD)/service/scripts%,$(SERVICE_OBJS))
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CURL_LIBS) $(shell pkg-config --libs jansson hiredis) $(TEST_LIBS) -lm

-include $(UNIT_OBJS:.o=.d) $(INTEG_OBJS:.o=.d)

CRITERION_JOBS ?= 2
REDLOCKD_BIN := $(abspath $(BINDIR)/redlockd)

# Instrumented builds (SANITIZER=address, undefined, address,undefined; see the
# Makefile): every service is stopped with SIGTERM so that its exit status fails the
# test on a finding (LeakSanitizer's leak check at exit with address, an aborted run
# with undefined: -fno-sanitize-recover); the runners' own leaks (inside libcriterion)
# are suppressed.
ifneq ($(SANITIZER),)
export LSAN_OPTIONS := suppressions=$(abspath tests/lsan.supp):print_suppressions=0
export REDLOCK_TEST_GRACEFUL := 1
endif

.PHONY: deps test test-unit test-integration test-integration-external
deps:
	$(Q)sh tests/install-deps.sh

test-unit: $(BUILD)/tests/unit_tests
	$(Q)$(BUILD)/tests/unit_tests --jobs $(CRITERION_JOBS) $(CRITERION_ARGS)

test-integration: $(BINDIR)/redlockd $(BUILD)/tests/integration_tests
	$(Q)REDLOCKD_BIN=$(REDLOCKD_BIN) $(BUILD)/tests/integration_tests --jobs $(CRITERION_JOBS) $(CRITERION_ARGS)

# Against a running stack: REDLOCK_TEST_URL and REDLOCK_TEST_MASTERS must be set;
# tests that start, freeze or kill processes skip themselves.
test-integration-external: $(BUILD)/tests/integration_tests
	$(Q)test -n "$$REDLOCK_TEST_URL" || { echo "set REDLOCK_TEST_URL (and REDLOCK_TEST_MASTERS)"; exit 2; }
	$(Q)$(BUILD)/tests/integration_tests --jobs 1 $(CRITERION_ARGS)

# What `make test` runs after the build: each fragment adds its own checks to
# TEST_EXTRA (e.g. test-cli, readme-check-main, compose-check, openapi-lint), and to TEST_MORE
# the longer ones that `make test-all` (what CI runs) adds: the chaos scenarios, the
# model checker, the client libraries' suites.  `make test` stays under 10 minutes on
# the project's 2-core machine (README.md).  The integration suite runs once: the
# answers it records (REDLOCK_TEST_RECORD) are what openapi-conformance-live checks.
# TEST_SIDE: the checks of TEST_EXTRA that run beside the others, after the integration
# suite (the README's examples and the document checks: light on the CPU, each with its
# own service and ports); their output follows.
TEST_EXTRA ?=
TEST_MORE ?=
TEST_SIDE ?= readme-check-main compose-check openapi-lint openapi-conformance \
             openapi-conformance-live k8s-check metrics-check
.PHONY: test-all test-more
test: deps
ifeq ($(SANITIZER),thread)
	@echo "make test: not under SANITIZER=thread (criterion's runner cannot start under TSan);" \
	  "run make test-tsan" >&2; exit 2
endif
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory test-unit
	$(Q)rec=$$(mktemp --suffix=.jsonl /tmp/redlockd-test-record-XXXXXX) || exit 2; \
	  side=$$(mktemp /tmp/redlockd-test-side-XXXXXX) || exit 2; \
	  trap 'rm -f "$$rec" "$$side"' EXIT; \
	  REDLOCK_TEST_RECORD="$$rec" $(MAKE) --no-print-directory test-integration || exit 1; \
	  ( for t in $(filter $(TEST_SIDE),$(TEST_EXTRA)); do \
	      $(MAKE) --no-print-directory $$t OPENAPI_LIVE_FROM="$$rec" || exit 1; done ) > "$$side" 2>&1 & \
	  pid=$$!; rc=0; \
	  for t in $(filter-out $(TEST_SIDE),$(TEST_EXTRA)); do \
	      $(MAKE) --no-print-directory $$t || { rc=1; break; }; done; \
	  wait $$pid || rc=1; \
	  echo "== (run beside them) $(filter $(TEST_SIDE),$(TEST_EXTRA))"; cat "$$side"; \
	  exit $$rc
	@echo "make test: all suites passed"

# The longer suites (TEST_MORE), after make test's or on their own.
test-more: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)for t in $(TEST_MORE); do $(MAKE) --no-print-directory $$t || exit 1; done
	@echo "make test-more: all suites passed"

test-all: test
	$(Q)$(MAKE) --no-print-directory test-more
	@echo "make test-all: all suites passed"

# The integration suites that need no fault timing, with redlockd under valgrind
# memcheck: each service is stopped with SIGTERM and its exit status (99 on any
# memory error or definite leak) must be 0.
VALGRIND_SUITES ?= api/* locking/* security/*
test-valgrind: $(BINDIR)/redlockd $(BUILD)/tests/integration_tests
	$(Q)set -f; for s in $(VALGRIND_SUITES); do \
	  REDLOCKD_BIN=$(abspath tools/valgrind-redlockd.sh) REDLOCK_TEST_GRACEFUL=1 \
	  REDLOCK_TEST_NODE_TIMEOUT_MS=2000 $(BUILD)/tests/integration_tests --jobs 2 --filter "$$s" \
	  $(CRITERION_ARGS) || exit 1; done

# ThreadSanitizer: criterion's runner cannot start under TSan ("Could not initialize
# inheritable arena": its arena mapping clashes with TSan's), so neither `make test` nor
# test-unit works with SANITIZER=thread; here the TSan-built service runs under the
# uninstrumented suite; each service is stopped with SIGTERM and a race report makes
# its exit status non-zero.
test-tsan:
	$(Q)$(MAKE) --no-print-directory SANITIZER=thread build/tsan/bin/redlockd
	$(Q)$(MAKE) --no-print-directory SANITIZER= build/default/tests/integration_tests
	$(Q)REDLOCKD_BIN=$(abspath build/tsan/bin/redlockd) REDLOCK_TEST_GRACEFUL=1 \
	  TSAN_OPTIONS="halt_on_error=0 exitcode=66" build/default/tests/integration_tests \
	  --jobs $(CRITERION_JOBS) $(CRITERION_ARGS)
