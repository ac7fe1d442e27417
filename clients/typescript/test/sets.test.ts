// sets.test.ts -- several names at once (POST /locks, DELETE /locks): all or nothing, one
// lease, a fencing token per name, per-name modes; a set kept by extensions (holdMany,
// usingMany) past its ttl, and lost when one of its names is broken.

import assert from "node:assert/strict";
import { test } from "node:test";

import { LeaseLostError, LockHeldError } from "@redlockd/client";

import { client, uniqueName, waitFor } from "./helpers.js";

test("acquireMany: every name at once under one lease, a token each, per-name modes; releaseMany", async () => {
  const c = client();
  const a = uniqueName("set-a");
  const b = uniqueName("set-b");
  const set = await c.acquireMany([a, b], { ttlMs: 10000, modes: { [b]: "shared" } });
  assert.deepEqual(set.names, [a, b]);
  assert.deepEqual(set.modes, { [a]: "exclusive", [b]: "shared" });
  assert.ok(set.fencingTokens[a]! >= 1);
  assert.equal((await c.status(a)).held, true);
  assert.equal((await c.status(b)).readers, 1);
  // A reader may join b; nobody may take a.
  const reader = await c.acquire(b, { shared: true, ttlMs: 5000 });
  await assert.rejects(c.acquire(a), LockHeldError);
  await reader.release();
  // Each name extends alone with the set's lease; the set extends as a whole.
  const xs = await set.extend({ ttlMs: 20000 });
  assert.deepEqual(xs.map((x) => x.name), [a, b]);
  assert.ok(set.remainingMs > 10000);
  assert.deepEqual(await c.releaseMany(set.lease), { names: [a, b], released: true });
  assert.equal((await c.status(a)).held, false);
  await assert.rejects(set.release(), LeaseLostError);
});

test("acquireMany: all or nothing -- one name held, none is taken", async () => {
  const c = client();
  const a = uniqueName("set-none-a");
  const b = uniqueName("set-none-b");
  const holder = await c.acquire(b, { ttlMs: 10000 });
  await assert.rejects(c.acquireMany([a, b], { ttlMs: 5000 }), LockHeldError);
  assert.equal((await c.status(a)).held, false);
  await holder.release();
  {
    await using set = await c.acquireMany([a, b], { ttlMs: 5000 });
    assert.equal(set.fencingTokens[b], holder.fencingToken + 1);
  }
  assert.equal((await c.status(b)).held, false, "released at the end of the scope");
});

test("usingMany: the set kept past its ttl by extensions, released after the routine", async () => {
  const c = client();
  const names = [uniqueName("kept-a"), uniqueName("kept-b"), uniqueName("kept-c")];
  const out = await c.usingMany(names, { ttlMs: 2000 }, async (set, signal) => {
    assert.equal(set.keepalive, "extend");
    const t0 = performance.now();
    await waitFor("more than a ttl", () => performance.now() - t0 > 2500);
    assert.ok(set.extensions >= 2, `${set.extensions} extensions`);
    assert.equal(signal.aborted, false, String(signal.reason));
    for (const n of names) assert.equal((await c.status(n)).held, true);
    return set.names.length;
  });
  assert.equal(out, 3);
  for (const n of names) assert.equal((await c.status(n)).held, false);
});

test("holdMany: one name broken by an admin is the loss of the set (lease_lost)", async () => {
  const c = client();
  const names = [uniqueName("lost-a"), uniqueName("lost-b")];
  const set = await c.holdMany(names, { ttlMs: 900 });
  await c.forceRelease(names[1]!);
  if (!set.signal.aborted) await new Promise((r) => set.signal.addEventListener("abort", r, { once: true }));
  const reason = set.signal.reason as LeaseLostError;
  assert.ok(reason instanceof LeaseLostError, String(reason));
  assert.equal(reason.reason, "lease_lost");
  assert.equal(set.held, false);
  await set.release();
  assert.equal((await c.status(names[0]!)).held, false, "release() let the rest of the set go");
});
