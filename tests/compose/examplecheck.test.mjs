// examplecheck.test.mjs -- examplecheck.mjs catches stale examples (node --test).
import test from "node:test";
import assert from "node:assert/strict";
import { loadSpec } from "./conformance.mjs";
import { checkExamples, examples } from "./examplecheck.mjs";

const H = { "content-type": "application/json", "x-request-id": "0123456789abcdef0123456789abcdef" };
const rec = (method, path, status, body, extra = {}) => ({ method, path, status, headers: { ...H, ...extra }, body });
const LIVE = [
  rec("POST", "/semaphores/pool/db", 409,
    { error: "lock_held", message: "every permit of this semaphore is taken", retry_after_ms: 3000 }, { "retry-after": "3" }),
  rec("GET", "/locks/orders/42", 200,
    { name: "orders/42", held: true, owner: null, validity_ms: 100, fencing_token: 3, index: "4" }),
  rec("POST", "/locks", 201,
    { names: ["a", "b"], lease: "abcdefghijklmnopqrstuvwxyz012345", fencing_tokens: { a: 1, b: 2 }, validity_ms: 9000, ttl_ms: 10000 },
    { location: "/locks/a" }),
];

/** A spec whose examples are only those of key (and name), one of them changed by edit. */
function specWith(key, name, edit) {
  const spec = loadSpec();
  for (const [tpl, item] of Object.entries(spec.doc.paths)) {
    for (const [m, op] of Object.entries(item)) {
      for (const [status, r] of Object.entries(op?.responses ?? {})) {
        const media = r?.content?.["application/json"];
        if (!media?.examples) continue;
        for (const [n, e] of Object.entries(media.examples)) {
          if (`${m.toUpperCase()} ${tpl} ${status}` !== key || n !== name) delete media.examples[n];
          else if (edit) media.examples[n] = { value: edit(structuredClone(e.value ?? {})) };
        }
      }
    }
  }
  return spec;
}

test("the document's examples of these operations match the live answers", () => {
  for (const [key, name] of [["POST /semaphores/{name} 409", "allTaken"], ["POST /locks 201", "granted"]]) {
    const r = checkExamples(specWith(key, name), LIVE);
    assert.equal(r.failed, 0, r.messages.join("\n"));
    assert.equal(r.passed, 1, `${key} ${name} checked`);
  }
});

test("a stale message is caught", () => {
  const spec = specWith("POST /semaphores/{name} 409", "allTaken",
    (v) => ({ ...v, message: "the lock is held by another lease" }));
  const r = checkExamples(spec, LIVE);
  assert.equal(r.failed, 1);
  assert.match(r.messages[0], /every permit of this semaphore is taken/);
});

test("a member the service no longer sends (or a new one) is caught", () => {
  const spec = specWith("GET /locks/{name} 200", "held", (v) => { delete v.owner; return v; });
  assert.equal(checkExamples(spec, LIVE).failed, 1);
  const spec2 = specWith("GET /locks/{name} 200", "held", (v) => ({ ...v, holder: "x" }));
  assert.equal(checkExamples(spec2, LIVE).failed, 1);
});

test("a map keyed by lock names compares no keys; an unprovoked example is not failed", () => {
  const spec = specWith("POST /locks 201", "granted", (v) => ({ ...v, fencing_tokens: { "x/1": 7 } }));
  assert.equal(checkExamples(spec, LIVE).failed, 0);
  const r = checkExamples(specWith("POST /locks/{name} 503", "tooManyWaiters"), LIVE);
  assert.equal(r.failed, 0);
  assert.ok(r.unseen.some((u) => u.includes("'tooManyWaiters'")), r.unseen.join("; "));
});
