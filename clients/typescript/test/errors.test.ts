// errors.test.ts -- the client's error codes are the API document's, and each answer
// becomes the error class its code says.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Client,
  ERROR_CODES,
  LeaseLostError,
  LockHeldError,
  RedlockError,
  UnauthorizedError,
  isErrorCode,
} from "@redlockd/client";

import { URL_, client, openapiText, uniqueName } from "./helpers.js";

/** The `error` enum of components.schemas.Error in api/openapi.yaml. */
function documentedCodes(yaml: string): string[] {
  const lines = yaml.split("\n");
  const start = lines.findIndex((l) => /^ {4}Error:\s*$/.test(l));
  assert.ok(start > 0, "components.schemas.Error not found in api/openapi.yaml");
  let i = start + 1;
  while (i < lines.length && !/^ {8}error:\s*$/.test(lines[i]!)) i++;
  while (i < lines.length && !/^ {10}enum:\s*$/.test(lines[i]!)) i++;
  const codes: string[] = [];
  for (i++; i < lines.length; i++) {
    const m = /^ {12}- ([a-z_]+)\s*$/.exec(lines[i]!);
    if (m === null) break;
    codes.push(m[1]!);
  }
  assert.ok(codes.length > 0, "no codes under components.schemas.Error.properties.error.enum");
  return codes;
}

/** Every code the document uses anywhere for `error` (examples, consts, per-response enums). */
function codesUsedAnywhere(yaml: string): Set<string> {
  const used = new Set<string>();
  for (const m of yaml.matchAll(/^\s*error: ([a-z_]+)\s*$/gm)) used.add(m[1]!);
  for (const m of yaml.matchAll(/^\s*error:\s*\n\s*(?:const: ([a-z_]+)|enum: \[([^\]]*)\])/gm)) {
    if (m[1] !== undefined) used.add(m[1]);
    for (const c of (m[2] ?? "").split(",")) if (c.trim() !== "") used.add(c.trim());
  }
  return used;
}

test("ERROR_CODES is exactly the error enum of api/openapi.yaml, in its order", () => {
  const yaml = openapiText();
  assert.deepEqual([...ERROR_CODES], documentedCodes(yaml));
});

test("every error code the document uses anywhere is one the client knows", () => {
  const used = codesUsedAnywhere(openapiText());
  assert.ok(used.has("lock_held") && used.has("invalid_hold"), "the scan found the document's codes");
  for (const code of used) assert.ok(isErrorCode(code), `api/openapi.yaml uses "${code}", not in ERROR_CODES`);
});

test("no token: UnauthorizedError with code unauthorized and status 401", async () => {
  const anonymous = new Client(URL_);
  const e = await anonymous.acquire(uniqueName("anon")).then(
    () => assert.fail("granted without a token"),
    (e: unknown) => e,
  );
  assert.ok(e instanceof UnauthorizedError, String(e));
  assert.equal(e.code, "unauthorized");
  assert.equal(e.status, 401);
  assert.ok(e.requestId !== undefined && e.requestId !== "");
});

test("an invalid ttl: RedlockError with the service's code, no retry", async () => {
  const e = await client().acquire(uniqueName("ttl"), { ttlMs: 0 }).then(
    () => assert.fail("granted with ttl 0"),
    (e: unknown) => e,
  );
  assert.ok(e instanceof RedlockError && !(e instanceof LockHeldError), String(e));
  assert.equal(e.code, "invalid_ttl");
  assert.equal(e.status, 400);
  assert.match(e.message, /ttl_ms/);
});

test("extend and release of a lease nobody holds: LeaseLostError lease_not_found", async () => {
  const c = client();
  const name = uniqueName("gone");
  for (const op of [() => c.extend(name, "nobody-holds-this-lease-0123"), () => c.release(name, "nobody-holds-this-lease-0123")]) {
    const e = await op().then(
      () => assert.fail("succeeded"),
      (e: unknown) => e,
    );
    assert.ok(e instanceof LeaseLostError, String(e));
    assert.equal(e.code, "lease_not_found");
    assert.equal(e.status, 404);
  }
});
