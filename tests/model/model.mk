# tests/model/model.mk -- the Promela models of the lock protocol and master trust
# (tests/model/redlock.pml), of reentrant and shared locks (reentrant.pml, shared.pml)
# and of a semaphore's record and count (semcount.pml),
# checked exhaustively with spin (Debian package `spin`); see tests/model/README.md.
# Included by the top Makefile, which defines BUILD, CC and Q.
#   make test-model                 the variants of `make test-all`, small configurations
#                                   (about 75 CPU-seconds, 45 when the verifiers are
#                                   built already): no counterexample for the new rules,
#                                   one for each old rule; ends with "N passed, M failed"
#   make test-model-full            every variant, with the large configurations (about
#                                   12 CPU-minutes more, up to 4.1 GB for one search; not
#                                   part of `make test-all`; MODEL_JOBS=1 on a shared machine)
#   make test-model MODEL_VARIANTS="new-faults old-proof-view"   only those
#   make test-model MODEL_NEW=""   redlock.pml without the two amendments of issue 10
#                                   that the model found (README.md)

MODEL_SPIN     ?= spin
MODEL_CC       ?= $(CC)
MODEL_JOBS     ?= 2
MODEL_NEW      ?= -DADOPT_FIX -DBOOT_FIX
MODEL_VARIANTS ?=

.PHONY: test-model test-model-full
test-model:
	@mkdir -p $(BUILD)/model
	$(Q)SPIN='$(MODEL_SPIN)' MODEL_CC='$(MODEL_CC)' JOBS='$(MODEL_JOBS)' NEW_FLAGS='$(MODEL_NEW)' \
	  SET=test sh tests/model/check.sh $(BUILD)/model $(MODEL_VARIANTS)

test-model-full:
	@mkdir -p $(BUILD)/model
	$(Q)SPIN='$(MODEL_SPIN)' MODEL_CC='$(MODEL_CC)' JOBS='$(MODEL_JOBS)' NEW_FLAGS='$(MODEL_NEW)' \
	  SET=full sh tests/model/check.sh $(BUILD)/model $(MODEL_VARIANTS)

TEST_MORE += test-model
