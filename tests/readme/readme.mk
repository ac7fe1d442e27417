# tests/readme/readme.mk -- `make readme-check` (part of `make test`): every console example
# of the READMEs run against a live service (five real redis-server masters and a new
# bin/redlockd per example, started by the checker on free ports) and compared with the
# README's text, only the documented variable parts masked.  The example format and the
# masks: tests/readme/readmecheck.py (its top).  First its self-test: every example of
# selftest-wrong.md must be caught, every one of selftest-right.md must pass.
#   make readme-check READMES=README.md     one file
#   python3 tests/readme/readmecheck.py --only README.md:LINE README.md    one example

READMES ?= README.md clients/python/README.md clients/go/README.md clients/typescript/README.md
README_CHECK := python3 tests/readme/readmecheck.py --redlockd $(abspath $(BINDIR)/redlockd)

TEST_EXTRA += readme-check

.PHONY: readme-check
readme-check: $(BINDIR)/redlockd $(BINDIR)/redlock
	$(Q)$(README_CHECK) --expect-fail tests/readme/selftest-wrong.md
	$(Q)$(README_CHECK) tests/readme/selftest-right.md
	$(Q)$(README_CHECK) $(wildcard $(READMES))

# The clients' packages carry the repository's licence: their copies must not drift.
readme-check: licence-check
.PHONY: licence-check
licence-check:
	$(Q)for f in clients/*/LICENSE; do cmp -s LICENSE $$f || { echo "licence-check: $$f differs from LICENSE"; exit 1; }; done
	@echo "licence-check: LICENSE and its copies in clients/*/ agree"
