# redlockd -- build, run and test.  `make`, `make run`, `make test`.
#
# Conventions (after redis/hiredis): -MMD dependency files, V=1 for verbose
# commands, SANITIZER selects an instrumented build in its own build directory:
#   SANITIZER=address            AddressSanitizer (+ LeakSanitizer)  build/asan/
#   SANITIZER=undefined          UndefinedBehaviorSanitizer          build/ubsan/
#   SANITIZER=address,undefined  both in one build (what CI runs)    build/asan-ubsan/
#   SANITIZER=thread             ThreadSanitizer                     build/tsan/
# (`make test` runs under the first three; under thread see `make test-tsan`.)
# Fragments under tests/*/ add their own targets.

CC       ?= cc
PKGS     := libmicrohttpd jansson hiredis gnutls
V        ?= 0
SANITIZER ?=

ifeq ($(V),0)
Q := @
else
Q :=
endif

OPT ?= -O2
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wno-format-nonliteral
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) -fno-strict-aliasing -pthread -MMD -MP
BASE_LDFLAGS := -pthread

ifeq ($(SANITIZER),)
  BUILD := build/default
  SAN_FLAGS :=
else ifeq ($(SANITIZER),address)
  BUILD := build/asan
  SAN_FLAGS := -fsanitize=address -fno-omit-frame-pointer
else ifeq ($(SANITIZER),undefined)
  BUILD := build/ubsan
  SAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq "$(SANITIZER)" "address,undefined"
  BUILD := build/asan-ubsan
  SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZER),thread)
  BUILD := build/tsan
  # GCC warns (-Wtsan) that TSan does not model the standalone fences of waitq.c's
  # seqlock; every field there is an atomic, so TSan cannot call them races: the
  # warning stays visible but does not stop the build (clang has no such warning).
  SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer \
               $(shell $(CC) -Werror -Wno-error=tsan -fsanitize=thread -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-error=tsan)
else
  $(error unknown SANITIZER '$(SANITIZER)': use address, undefined, address,undefined or thread)
endif

# Binaries of the selected build; the default build also goes to bin/.
BINDIR := $(if $(SANITIZER),$(BUILD)/bin,bin)

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

ALL_CFLAGS  = $(BASE_CFLAGS) $(SAN_FLAGS) $(PKG_CFLAGS) -Iservice $(CFLAGS)
ALL_LDFLAGS = $(BASE_LDFLAGS) $(SAN_FLAGS) $(LDFLAGS)

.PHONY: all
all: $(BINDIR)/redlockd

include service/service.mk
include tests/tests.mk
-include $(wildcard tests/*/*.mk)
include clients/clients.mk

.PHONY: clean
clean:
	rm -rf build bin

# Five local masters plus the service in the foreground (Ctrl-C stops all).
.PHONY: run
run: $(BINDIR)/redlockd
	$(Q)sh tools/run-local.sh $(ARGS)
