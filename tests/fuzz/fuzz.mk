# fuzz.mk -- libFuzzer targets for the parsers and decoders that face untrusted bytes
# (request bodies, query strings, configuration, master replies, the tokens file).
#
#   make fuzz [FUZZ_SECONDS=10] [FUZZ_TARGETS="body reply"]   each target for N seconds
#   make fuzz-smoke                                            2 s each + regression replay (make test)
#   make fuzz-more                                             20 s each (make test-all)
#   make fuzz-regress                                          replay regressions/ only
#   make fuzz FUZZ_KNOWN_BUGS=1                                also check known, reported bugs
#
# Everything is built by clang with -fsanitize=fuzzer,address,undefined into build/fuzz/
# (its own copies of the service objects, never the gcc ones).  Seeds are read from
# tests/fuzz/corpus/<target>/; what the fuzzer finds goes to build/fuzz/corpus/<target>/
# (kept between runs), crashes to tests/fuzz/artifacts/<target>/.  A minimized crash
# belongs in tests/fuzz/regressions/<target>/, which fuzz-smoke replays.

FUZZ_CC         ?= clang
FUZZ_SECONDS    ?= 10
FUZZ_SMOKE_SECONDS ?= 2
FUZZ_MORE_SECONDS ?= 20
FUZZ_KNOWN_BUGS ?= 0
FUZZ_TARGETS    ?= body query config reply tokens
FUZZ_DIR        := build/fuzz$(if $(filter 1,$(FUZZ_KNOWN_BUGS)),-known-bugs)

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  = -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) -fno-strict-aliasing -pthread $(FUZZ_SAN) \
               -fsanitize=fuzzer-no-link -DFUZZ_KNOWN_BUGS=$(FUZZ_KNOWN_BUGS) \
               $(PKG_CFLAGS) -Iservice -MMD -MP

# The service objects each target links, and its libraries.
FUZZ_OBJS_body   := validate redlock jw
FUZZ_OBJS_query  := validate redlock
FUZZ_OBJS_config := config log jw
FUZZ_OBJS_reply  := reply
FUZZ_OBJS_tokens := auth lease
FUZZ_LIBS_body   := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
FUZZ_LIBS_query  := $(FUZZ_LIBS_body)
FUZZ_LIBS_config :=
FUZZ_LIBS_reply  := $(shell pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)
FUZZ_LIBS_tokens :=

FUZZ_BINS := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))

$(FUZZ_DIR)/service/%.o: service/%.c
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  CLANG   $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/tests/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(if $(filter 0,$(V)),@echo "  CLANG   $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

define FUZZ_template
$(FUZZ_DIR)/fuzz_$(1): $(FUZZ_DIR)/tests/fuzz_$(1).o $(patsubst %,$(FUZZ_DIR)/service/%.o,$(FUZZ_OBJS_$(1)))
	$$(if $$(filter 0,$$(V)),@echo "  LD      $$@")
	$$(Q)$$(FUZZ_CC) $$(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $$@ $$^ $(FUZZ_LIBS_$(1)) -lm
endef
$(foreach t,body query config reply tokens,$(eval $(call FUZZ_template,$(t))))

-include $(wildcard $(FUZZ_DIR)/service/*.d $(FUZZ_DIR)/tests/*.d)

.PHONY: fuzz fuzz-build fuzz-smoke fuzz-more fuzz-regress
fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	$(Q)sh tests/fuzz/run.sh fuzz $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	$(Q)sh tests/fuzz/run.sh fuzz $(FUZZ_SMOKE_SECONDS) $(FUZZ_DIR) $(FUZZ_TARGETS)
	$(Q)sh tests/fuzz/run.sh regress 0 $(FUZZ_DIR) $(FUZZ_TARGETS)

fuzz-more: fuzz-build
	$(Q)sh tests/fuzz/run.sh fuzz $(FUZZ_MORE_SECONDS) $(FUZZ_DIR) $(FUZZ_TARGETS)

fuzz-regress: fuzz-build
	$(Q)sh tests/fuzz/run.sh regress 0 $(FUZZ_DIR) $(FUZZ_TARGETS)

TEST_EXTRA += fuzz-smoke
TEST_MORE += fuzz-more
