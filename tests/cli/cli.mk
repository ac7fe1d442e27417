# tests/cli/cli.mk -- bin/redlock, the command-line client (sources in service/cli/), and
# its tests.  Included by the top Makefile, which defines CC, Q, BUILD, BINDIR,
# BASE_CFLAGS, BASE_LDFLAGS and SAN_FLAGS.
#   make cli        build $(BINDIR)/redlock
#   make test-cli   unit tests (Criterion) + the end-to-end test against real redis-server
#                   and bin/redlockd (tests/cli/test_cli.py)

CLI_PKGS     := libcurl jansson
CLI_SRCS     := $(wildcard service/cli/*.c)
CLI_OBJS     := $(patsubst service/cli/%.c,$(BUILD)/cli/%.o,$(CLI_SRCS))
CLI_LIB_OBJS := $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJS))
CLI_CFLAGS    = $(BASE_CFLAGS) $(SAN_FLAGS) $(shell pkg-config --cflags $(CLI_PKGS)) \
                -Iservice $(CFLAGS)
CLI_LIBS      = $(shell pkg-config --libs $(CLI_PKGS))
CLI_LDFLAGS   = $(BASE_LDFLAGS) $(SAN_FLAGS) $(LDFLAGS)
CLI_UNIT      := $(BUILD)/cli/test_cli_unit

.PHONY: cli test-cli test-cli-unit test-cli-e2e
cli: $(BINDIR)/redlock
all: $(BINDIR)/redlock

$(BINDIR)/redlock: $(CLI_OBJS)
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(CLI_LDFLAGS) -o $@ $(CLI_OBJS) $(CLI_LIBS)

$(BUILD)/cli/%.o: service/cli/%.c
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(CLI_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/cli/tests/%.o: tests/cli/%.c
	@mkdir -p $(@D)
	$(if $(filter 0,$(V)),@echo "  CC      $<")
	$(Q)$(CC) $(CLI_CFLAGS) -MMD -MP -c -o $@ $<

$(CLI_UNIT): $(BUILD)/cli/tests/test_cli_unit.o $(CLI_LIB_OBJS)
	$(if $(filter 0,$(V)),@echo "  LD      $@")
	$(Q)$(CC) $(CLI_LDFLAGS) -o $@ $^ -lcriterion $(CLI_LIBS)

test-cli-unit: $(CLI_UNIT)
	$(CLI_UNIT)

# REDLOCKD may point at another build of the service (e.g. a sanitizer build).
REDLOCKD ?= $(BINDIR)/redlockd
test-cli-e2e: $(BINDIR)/redlock $(REDLOCKD)
	python3 tests/cli/test_cli.py --redlock $(BINDIR)/redlock --redlockd $(REDLOCKD)

test-cli: test-cli-unit test-cli-e2e

-include $(CLI_OBJS:.o=.d) $(BUILD)/cli/tests/test_cli_unit.d
TEST_EXTRA += test-cli
