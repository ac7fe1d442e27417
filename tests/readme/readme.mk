# tests/readme/readme.mk -- `make readme-check`: every console example
# of the READMEs run against a live service (five real redis-server masters and a new
# bin/redlockd per example, started by the checker on free ports) and compared with the
# README's text, only the documented variable parts masked.  The example format and the
# masks: tests/readme/readmecheck.py (its top).  First its self-test: every example of
# selftest-wrong.md must be caught, every one of selftest-right.md must pass.
#   make readme-check READMES=README.md     one file (make test: readme-check-main)
#   python3 tests/readme/readmecheck.py --only README.md:LINE README.md    one example

README_CLIENTS := clients/python/README.md clients/go/README.md clients/typescript/README.md
READMES ?= README.md $(README_CLIENTS)
README_CHECK := python3 tests/readme/readmecheck.py --redlockd $(abspath $(BINDIR)/redlockd)

# make test checks the self-test and this README's examples; make test-all (TEST_MORE)
# the client libraries' READMEs too (their suites run there: make test-clients).
TEST_EXTRA += readme-check-main
TEST_MORE += readme-check-clients

.PHONY: readme-check readme-check-main readme-check-clients readme-selftest
readme-selftest: $(BINDIR)/redlockd $(BINDIR)/redlock
	$(Q)$(README_CHECK) --expect-fail tests/readme/selftest-wrong.md
	$(Q)$(README_CHECK) tests/readme/selftest-right.md

readme-check: readme-selftest
	$(Q)$(README_CHECK) $(wildcard $(READMES))

readme-check-main: readme-selftest
	$(Q)$(README_CHECK) README.md

readme-check-clients: $(BINDIR)/redlockd $(BINDIR)/redlock
	$(Q)$(README_CHECK) $(wildcard $(README_CLIENTS))

# The clients' packages carry the repository's licence: their copies must not drift.
readme-check readme-check-main: licence-check
.PHONY: licence-check
licence-check:
	$(Q)for f in clients/*/LICENSE; do cmp -s LICENSE $$f || { echo "licence-check: $$f differs from LICENSE"; exit 1; }; done
	@echo "licence-check: LICENSE and its copies in clients/*/ agree"
