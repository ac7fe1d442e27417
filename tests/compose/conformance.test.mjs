// conformance.test.mjs -- node --test: conformance.mjs accepts the sample responses made from the
// spec and rejects each deliberately wrong one with the expected message.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadSpec, checkRecord, checkLines } from "./conformance.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const GOOD = path.join(HERE, "fixtures/responses.jsonl");
const BAD = path.join(HERE, "fixtures/bad-responses.jsonl");
const spec = loadSpec();

test("every sample response made from the spec conforms", () => {
  const r = checkLines(spec, fs.readFileSync(GOOD, "utf8"), "responses.jsonl");
  assert.deepEqual(r.messages, []);
  assert.ok(r.passed >= 30, `only ${r.passed} sample lines`);
});

const badLines = fs.readFileSync(BAD, "utf8").split("\n").filter((l) => l.trim());
for (const [i, line] of badLines.entries()) {
  let rec = null;
  try { rec = JSON.parse(line); } catch { /* the not-JSON case */ }
  const why = rec?.why ?? "a line that is not JSON";
  test(`rejects bad line ${i + 1}: ${why}`, () => {
    const r = checkLines(spec, line, "bad");
    assert.equal(r.failed, 1, `accepted: ${line}`);
    const expect = rec?.expect_error ?? "not JSON";
    assert.ok(r.messages.some((m) => m.includes(expect)),
      `expected a message with ${JSON.stringify(expect)}, got ${JSON.stringify(r.messages)}`);
  });
}

test("a record without method, path or status is refused", () => {
  assert.match(checkRecord(spec, { path: "/healthz", status: 200 }).problems[0], /missing "method"/);
});

function cli(...args) {
  return spawnSync(process.execPath, [path.join(HERE, "conformance.mjs"), ...args], { encoding: "utf8" });
}

test("CLI: exit 0 and a closing count on the good file", () => {
  const r = cli(GOOD);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /openapi-conformance: \d+ passed, 0 failed/);
});

test("CLI: exit 1 with one FAIL line per problem on the bad file", () => {
  const r = cli(BAD);
  assert.equal(r.status, 1);
  assert.match(r.stdout, /openapi-conformance: 0 passed, \d+ failed/);
});

test("CLI: exit 2 on a missing file, exit 1 on an empty one", () => {
  assert.equal(cli(path.join(HERE, "fixtures/does-not-exist.jsonl")).status, 2);
  const empty = path.join(fs.mkdtempSync("/tmp/conformance-"), "empty.jsonl");
  fs.writeFileSync(empty, "\n");
  assert.equal(cli(empty).status, 1);
  fs.rmSync(path.dirname(empty), { recursive: true });
});
