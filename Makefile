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

# `make run`: installs what running needs (tests/install-deps.sh run; as root, else it
# prints the apt-get line), builds the service and the CLI, and starts new local masters
# plus the service in the foreground (Ctrl-C stops all).  Variables (tools/run-local.sh):
#   PORT=8080 (127.0.0.1:PORT)  MASTERS=5  MASTER_PORT=7001 (the first of MASTERS ports)
#   TOKENS=FILE (--auth-tokens-file)  LOG_FORMAT=json|text  ARGS='any other flags'
#   RUN_DIR=run (the masters' data)
# e.g. make run PORT=9090 MASTERS=3 TOKENS=tokens.txt LOG_FORMAT=text ARGS='--max-ttl-ms 60000'
PORT        ?= 8080
MASTERS     ?= 5
MASTER_PORT ?= 7001
TOKENS      ?=
LOG_FORMAT  ?= json
ARGS        ?=
RUN_DIR     ?= run

.PHONY: run deps-run
deps-run:
	$(Q)sh tests/install-deps.sh run

run: deps-run
	$(Q)$(MAKE) --no-print-directory all
	$(Q)PORT='$(PORT)' MASTERS='$(MASTERS)' MASTER_PORT='$(MASTER_PORT)' TOKENS='$(TOKENS)' \
	  LOG_FORMAT='$(LOG_FORMAT)' ARGS='$(ARGS)' RUN_DIR='$(RUN_DIR)' sh tools/run-local.sh

# `make fresh-check` (root; not part of `make test`): `make run` and `make test` in a new
# minimal Debian bookworm root (debootstrap, cached in build/fresh/base), each from a clone
# of this repository's HEAD; FRESH_STEPS=run or FRESH_STEPS=test for one of them.  See
# tools/fresh-check.sh.
.PHONY: fresh-check
fresh-check:
	$(Q)FRESH_STEPS='$(or $(FRESH_STEPS),run test)' sh tools/fresh-check.sh

# `make image`: the container image that deploy/kubernetes/redlockd.yaml names
# (redlockd:VERSION), built from the Dockerfile with podman or docker, whichever is
# installed (IMAGE=name:tag to call it otherwise; IMAGE_TOOL=docker to choose).
VERSION    := $(shell sed -n 's/^\#define RL_VERSION "\(.*\)"/\1/p' service/version.h)
IMAGE      ?= redlockd:$(VERSION)
IMAGE_TOOL ?= $(shell command -v podman > /dev/null 2>&1 && echo podman || echo docker)
.PHONY: image
image:
	$(Q)command -v $(IMAGE_TOOL) > /dev/null || { echo "make image: neither podman nor docker is installed (apt-get install podman)"; exit 1; }
	$(IMAGE_TOOL) build -t $(IMAGE) -f Dockerfile .
	@echo "make image: built $(IMAGE); push it where your cluster pulls from and set the image in deploy/kubernetes/redlockd.yaml (or kustomize's images:)"
