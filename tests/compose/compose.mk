# compose.mk -- container, deploy and API-document checks (included by the top Makefile).
#   make compose-check        static: docker-compose.yml, Dockerfile, deploy/ (no engine needed)
#   make compose-test         end to end: podman builds the images, the compose stack runs, the
#                             integration suite + smoke checks run against it, masters are frozen
#                             and stopped; cleans up after itself
#   make openapi-lint         redocly lint of api/openapi.yaml
#   make openapi-conformance  recorded responses vs api/openapi.yaml (OPENAPI_RESPONSES=FILE.jsonl,
#                             default: the fixture, plus the checker's own tests)
#   make openapi-conformance-live
#                             builds, runs the integration suite against the real bin/redlockd
#                             with REDLOCK_TEST_RECORD, and checks every recorded response
#                             (OPENAPI_LIVE_RECORD=FILE keeps the recording there), and
#                             every response example of the document against those answers
#                             (examplecheck.mjs: messages and members)
#   make k8s-check            deploy/kubernetes: schemas, unknown fields, redlockd's rules
#   make metrics-check        deploy/prometheus alert rules (promtool check + unit tests) and the
#                             Grafana dashboard: every query parses and names metrics and labels
#                             of a real redlockd's /metrics (scraped here; METRICS_SCRAPE=FILE
#                             keeps the scrape)
# The node tools are pinned in tests/compose/package.json + package-lock.json (npm ci).

COMPOSE_DIR        := tests/compose
COMPOSE_NODE_STAMP := $(COMPOSE_DIR)/node_modules/.package-lock.json
COMPOSE_NODE_ENV   := REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
OPENAPI_RESPONSES  ?=
OPENAPI_LIVE_RECORD ?=

TEST_EXTRA += compose-check openapi-lint openapi-conformance openapi-conformance-live k8s-check \
              metrics-check

$(COMPOSE_NODE_STAMP): $(COMPOSE_DIR)/package.json $(COMPOSE_DIR)/package-lock.json
	$(Q)command -v npm > /dev/null || { echo "compose.mk: npm missing (apt-get install nodejs npm)"; exit 1; }
	$(Q)cd $(COMPOSE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	$(Q)touch $@

.PHONY: compose-node-deps compose-check compose-test openapi-lint openapi-conformance \
        openapi-conformance-live k8s-check metrics-check
compose-node-deps: $(COMPOSE_NODE_STAMP)

compose-check:
	$(Q)$(COMPOSE_DIR)/check.sh

compose-test: $(COMPOSE_NODE_STAMP)
	$(Q)$(COMPOSE_DIR)/e2e.sh

openapi-lint: $(COMPOSE_NODE_STAMP)
	$(Q)out=$$($(COMPOSE_NODE_ENV) $(COMPOSE_DIR)/node_modules/.bin/redocly lint --format=stylish \
	    --config api/redocly.yaml api/openapi.yaml 2>&1); rc=$$?; \
	    printf '%s\n' "$$out" | grep -v -E '^ *(║|╔|╚)'; \
	    if [ $$rc = 0 ]; then echo "openapi-lint: 1 passed, 0 failed"; else echo "openapi-lint: 0 passed, 1 failed"; fi; \
	    exit $$rc

# The checker's own tests (node --test), summarised; the full TAP output only on failure.
define compose_node_selftest
	$(Q)out=$$(node --test $(1) 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	    printf '%s\n' "$$out" | grep -E '^# (tests|pass|fail) ' | sed 's/^# //' | tr '\n' ' ' | sed 's/^/$(2): /'; echo
endef

openapi-conformance: $(COMPOSE_NODE_STAMP)
ifeq ($(OPENAPI_RESPONSES),)
	$(call compose_node_selftest,$(COMPOSE_DIR)/conformance.test.mjs,conformance.mjs self-test)
	$(Q)node $(COMPOSE_DIR)/conformance.mjs --coverage $(COMPOSE_DIR)/fixtures/responses.jsonl
else
	$(Q)node $(COMPOSE_DIR)/conformance.mjs --coverage $(OPENAPI_RESPONSES)
endif

# The real service's answers, as the integration suite provokes them (about 40 s on 2 cores).
# Whether the suite's own assertions pass is test-integration's verdict: here failing tests are
# listed, but only a response that does not conform (or an empty recording) fails the target.
# OPENAPI_LIVE_FROM=FILE: check the answers an integration run already recorded in FILE
# (make test records its own run of the suite, REDLOCK_TEST_RECORD, instead of running it
# twice); without it, the suite is run here to record them.
OPENAPI_LIVE_FROM ?=
openapi-conformance-live: $(COMPOSE_NODE_STAMP) $(BINDIR)/redlockd $(BUILD)/tests/integration_tests
	$(call compose_node_selftest,$(COMPOSE_DIR)/examplecheck.test.mjs,examplecheck.mjs self-test (stale examples caught))
	$(Q)rec="$(OPENAPI_LIVE_RECORD)"; [ -n "$$rec" ] || rec=$$(mktemp --suffix=.jsonl /tmp/redlockd-openapi-live-XXXXXX); \
	    t0=$$(date +%s); \
	    if [ -n "$(OPENAPI_LIVE_FROM)" ]; then \
	        [ -s "$(OPENAPI_LIVE_FROM)" ] || { echo "openapi-conformance-live: nothing recorded in $(OPENAPI_LIVE_FROM)"; exit 2; }; \
	        [ "$(OPENAPI_LIVE_FROM)" = "$$rec" ] || cp "$(OPENAPI_LIVE_FROM)" "$$rec" || exit 2; \
	        echo "openapi-conformance-live: the answers recorded by this make test's integration suite"; \
	    else \
	    : > "$$rec" || exit 2; \
	    out=$$(REDLOCK_TEST_RECORD="$$rec" REDLOCKD_BIN=$(REDLOCKD_BIN) \
	        $(BUILD)/tests/integration_tests --jobs $(CRITERION_JOBS) $(CRITERION_ARGS) 2>&1); suite=$$?; \
	    printf '%s\n' "$$out" | sed -n 's/^\[====\] Synthesis: /openapi-conformance-live: integration suite: /p'; \
	    if [ $$suite != 0 ]; then \
	        printf '%s\n' "$$out" | grep -E '^\[(FAIL|----)\]' | sed 's/^/  /'; \
	        echo "openapi-conformance-live: (failing tests are for test-integration to judge; the recording is checked all the same)"; \
	    fi; \
	    fi; \
	    node $(COMPOSE_DIR)/conformance.mjs --coverage "$$rec"; rc=$$?; \
	    node $(COMPOSE_DIR)/examplecheck.mjs "$$rec" || rc=1; \
	    echo "openapi-conformance-live: $$(grep -c . "$$rec") responses recorded in $$(( $$(date +%s) - t0 )) s"; \
	    if [ $$rc != 0 ]; then echo "openapi-conformance-live: the recording is kept: $$rec"; \
	    elif [ -z "$(OPENAPI_LIVE_RECORD)" ]; then rm -f "$$rec"; fi; \
	    exit $$rc

k8s-check: $(COMPOSE_NODE_STAMP)
	$(call compose_node_selftest,$(COMPOSE_DIR)/k8scheck.test.mjs,k8scheck.mjs self-test (each breakage caught))
	$(Q)node $(COMPOSE_DIR)/k8scheck.mjs

METRICS_SCRAPE ?=
metrics-check: $(COMPOSE_NODE_STAMP) $(BINDIR)/redlockd
	$(Q)command -v promtool > /dev/null || { echo "metrics-check: promtool missing (apt-get install prometheus)"; exit 1; }
	$(Q)promtool check rules deploy/prometheus/redlockd-alerts.yaml
	$(Q)out=$$(promtool test rules $(COMPOSE_DIR)/alerts.test.yaml 2>&1) || { printf '%s\n' "$$out"; exit 1; }; \
	    echo "promtool test rules: $$(grep -c 'alertname:' $(COMPOSE_DIR)/alerts.test.yaml) alert expectations met"
	$(call compose_node_selftest,$(COMPOSE_DIR)/metricscheck.test.mjs,metricscheck.mjs self-test (each breakage caught))
	$(Q)scrape="$(METRICS_SCRAPE)"; [ -n "$$scrape" ] || scrape=$$(mktemp /tmp/redlockd-metrics-XXXXXX); \
	    $(COMPOSE_DIR)/scrape-metrics.sh "$$scrape" $(BINDIR)/redlockd || { rm -f "$$scrape"; exit 1; }; \
	    node $(COMPOSE_DIR)/metricscheck.mjs --metrics "$$scrape"; rc=$$?; \
	    [ -n "$(METRICS_SCRAPE)" ] || rm -f "$$scrape"; exit $$rc
