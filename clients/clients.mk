# clients/clients.mk -- the client libraries (clients/python, clients/go,
# clients/typescript), each tested against 5 real redis-server masters and the real
# redlockd that clients/stack.py starts.  Included by the top Makefile.
#   make test-clients          every client whose directory exists, in turn, then
#                              clients/coverage.py (each operationId of api/openapi.yaml
#                              has a method in each client: clients/README.md)
#   make test-clients-LANG     one of them (LANG: python, go, typescript)
#   make clients-coverage      clients/coverage.py alone
# Each runs `python3 clients/stack.py -- clients/LANG/test.sh`.  golang-go (and the
# Node.js that other checks already need) come from tests/install-deps.sh (`make deps`).

CLIENT_LANGS := python go typescript
CLIENT_REDLOCKD := $(abspath $(BINDIR)/redlockd)

.PHONY: test-clients $(addprefix test-clients-,$(CLIENT_LANGS)) clients-coverage
test-clients: deps $(BINDIR)/redlockd
	$(Q)for l in $(CLIENT_LANGS); do \
	  if [ -d clients/$$l ]; then \
	    echo "test-clients: $$l"; \
	    REDLOCKD_BIN=$(CLIENT_REDLOCKD) python3 clients/stack.py -- clients/$$l/test.sh || exit 1; \
	  fi; \
	done
	$(Q)python3 clients/coverage.py

clients-coverage:
	$(Q)python3 clients/coverage.py

$(addprefix test-clients-,$(CLIENT_LANGS)): test-clients-%: deps $(BINDIR)/redlockd
	$(Q)REDLOCKD_BIN=$(CLIENT_REDLOCKD) python3 clients/stack.py -- clients/$*/test.sh

TEST_MORE += test-clients

# A client's own fragment (its build tools, e.g. typescript's npm ci).
-include $(wildcard clients/*/*.mk)
