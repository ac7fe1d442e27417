# clients/typescript/typescript.mk -- the TypeScript client's dev dependencies (typescript,
# @types/node: the compiler and Node's types, nothing the client needs at run time), pinned
# in package-lock.json and installed with `npm ci` before its tests, as tests/compose does.
# Included by clients/clients.mk; clients/typescript/test.sh installs nothing itself.

CLIENT_TS_DIR   := clients/typescript
CLIENT_TS_STAMP := $(CLIENT_TS_DIR)/node_modules/.package-lock.json

$(CLIENT_TS_STAMP): $(CLIENT_TS_DIR)/package.json $(CLIENT_TS_DIR)/package-lock.json | deps
	$(Q)command -v npm > /dev/null || { echo "typescript.mk: npm missing (apt-get install nodejs npm)"; exit 1; }
	$(Q)cd $(CLIENT_TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	$(Q)touch $@

test-clients test-clients-typescript: $(CLIENT_TS_STAMP)
