// shared.test.ts -- shared locks and semaphores against the real service: readers at once
// with a writer refused, a writer waiting for readers, a semaphore of 2 that never has a
// third holder and gives a waiter the permit released, permits_mismatch, and the held forms
// (hold with shared, holdSemaphore/usingSemaphore) released at the end.

import assert from "node:assert/strict";
import { test } from "node:test";

import { type HeldLock, LockHeldError, PermitsMismatchError, RedlockError } from "@redlockd/client";

import { client, metric, uniqueName, waitFor } from "./helpers.js";

/** Resolves after ms, unless one of the locks' signals aborts first (then it rejects). */
async function heldFor(ms: number, locks: readonly HeldLock[]): Promise<void> {
  const t0 = performance.now();
  await waitFor(`${ms} ms held`, () => {
    const lost = locks.find((l) => l.signal.aborted);
    if (lost !== undefined) throw new Error(`lost: ${String(lost.signal.reason)}`);
    return performance.now() - t0 > ms;
  });
}

test("readers: four held at once past their ttl, a writer refused (409) meanwhile, granted after", async () => {
  const c = client();
  const name = uniqueName("readers");
  const settled = await Promise.allSettled([1, 2, 3, 4].map(() => c.hold(name, { ttlMs: 2000, shared: true })));
  const readers = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  try {
    for (const r of settled) if (r.status === "rejected") throw r.reason;
    await heldFor(2500, readers);
    assert.ok(readers.every((r) => r.shared && r.held));
    const s = await c.status(name);
    assert.deepEqual({ held: s.held, readers: s.readers }, { held: false, readers: 4 });
    assert.deepEqual(new Set(readers.map((r) => r.fencingToken)), new Set([s.fencingToken]));
    const e = await c.acquire(name, { ttlMs: 1000 }).then(
      () => assert.fail("a writer granted among readers"),
      (e: unknown) => e,
    );
    assert.ok(e instanceof LockHeldError, String(e));
    assert.deepEqual([e.code, e.status], ["lock_held", 409]);
  } finally {
    for (const r of readers) assert.equal(await r.release(), true);
  }
  assert.equal((await c.status(name)).readers, 0);
  const w = await c.acquire(name, { ttlMs: 1000 });
  assert.ok(!w.shared && w.fencingToken > readers[0]!.fencingToken);
  await c.release(name, w.lease);
});

test("shared plain calls: extend and release a reader's lease; a waiting writer is granted after the last reader", async () => {
  const c = client();
  const name = uniqueName("shared-plain");
  const r1 = await c.acquire(name, { ttlMs: 10000, shared: true });
  const r2 = await c.acquire(name, { ttlMs: 10000, shared: true });
  assert.ok(r1.shared && r2.shared && r1.lease !== r2.lease);
  assert.ok((await c.extend(name, r1.lease, { ttlMs: 20000 })).validityMs > 10000);
  const parked = await metric("redlockd_parked_waiters");
  let settled = false;
  const writer = c.acquire(name, { ttlMs: 5000, waitMs: 15000 }).finally(() => (settled = true));
  await waitFor("the writer to be parked", async () => (await metric("redlockd_parked_waiters")) > parked);
  await c.release(name, r1.lease);
  assert.equal(settled, false, "the writer was answered beside a reader");
  await c.release(name, r2.lease);
  const w = await writer;
  assert.ok(!w.shared && w.fencingToken > r1.fencingToken);
  const s = await c.status(name);
  assert.deepEqual({ held: s.held, readers: s.readers }, { held: true, readers: 0 });
  await c.release(name, w.lease);
});

test("a semaphore of 2: a third is refused (409), a waiter gets the slot released", async () => {
  const c = client();
  const name = uniqueName("sem");
  const p1 = await c.acquirePermit(name, { permits: 2, ttlMs: 10000 });
  const p2 = await c.acquirePermit(name, { permits: 2, ttlMs: 10000 });
  assert.deepEqual(new Set([p1.slot, p2.slot]), new Set([0, 1]));
  for (const p of [p1, p2]) assert.deepEqual([p.permits, p.fencingToken % 1024], [2, p.slot]);
  const e = await c.acquirePermit(name, { permits: 2 }).then(
    () => assert.fail("a third permit of 2"),
    (e: unknown) => e,
  );
  assert.ok(e instanceof LockHeldError, String(e));
  assert.deepEqual([e.code, e.status], ["lock_held", 409]);
  assert.ok(e.retryAfterMs > 5000, `retryAfterMs ${e.retryAfterMs}`);
  assert.deepEqual(await c.semaphoreStatus(name), { name, permits: 2, held: 2, free: 0 });
  const parked = await metric("redlockd_parked_waiters");
  let settled = false;
  const waiter = c.acquirePermit(name, { permits: 2, ttlMs: 10000, waitMs: 15000 }).finally(() => (settled = true));
  await waitFor("the waiter to be parked", async () => (await metric("redlockd_parked_waiters")) > parked);
  assert.equal(settled, false, "the waiter did not wait");
  await c.releasePermit(name, p1.lease);
  const p3 = await waiter;
  assert.equal(p3.slot, p1.slot);
  assert.ok(p3.fencingToken > Math.max(p1.fencingToken, p2.fencingToken));
  const x = await c.extendPermit(name, p2.lease, { ttlMs: 20000 });
  assert.ok(x.validityMs > 10000 && x.fencingToken % 1024 === p2.slot);
  for (const p of [p2, p3]) await c.releasePermit(name, p.lease);
  assert.equal((await c.semaphoreStatus(name)).held, 0);
});

test("permits_mismatch: PermitsMismatchError with the permits in use; invalid_permits", async () => {
  const c = client();
  const name = uniqueName("sem-mismatch");
  const p = await c.acquirePermit(name, { permits: 2, ttlMs: 10000 });
  try {
    for (const attempt of [() => c.acquirePermit(name, { permits: 3 }), () => c.usingSemaphore(name, { permits: 3 }, () => assert.fail("entered"))]) {
      const e = await attempt().then(
        () => assert.fail("granted with another number of permits"),
        (e: unknown) => e,
      );
      assert.ok(e instanceof PermitsMismatchError && !(e instanceof LockHeldError), String(e));
      assert.deepEqual([e.code, e.status, e.permits], ["permits_mismatch", 409, 2]);
    }
    for (const permits of [0, 2000]) {
      const e = await c.acquirePermit(name, { permits }).then(
        () => assert.fail(`granted with permits ${permits}`),
        (e: unknown) => e,
      );
      assert.ok(e instanceof RedlockError && e.code === "invalid_permits", String(e));
    }
  } finally {
    await c.releasePermit(name, p.lease);
  }
});

test("usingSemaphore: permits kept past their ttl, a third refused, a waiter gets the one released, all released after", async () => {
  const c = client();
  const name = uniqueName("sem-held");
  const a = await c.holdSemaphore(name, { permits: 2, ttlMs: 2000 });
  let waiter: Promise<number> | undefined;
  const slotB = await c.usingSemaphore(name, { permits: 2, ttlMs: 2000 }, async (b, signal) => {
    assert.equal(signal, b.signal);
    assert.deepEqual(new Set([a.slot, b.slot]), new Set([0, 1]));
    assert.deepEqual([b.permits, b.fencingToken % 1024], [2, b.slot]);
    await heldFor(2500, [a, b]);
    assert.ok(a.extensions >= 3 && b.extensions >= 3, `${a.extensions}, ${b.extensions} extensions`);
    assert.equal((await c.semaphoreStatus(name)).held, 2);
    await assert.rejects(c.usingSemaphore(name, { permits: 2, ttlMs: 2000 }, () => assert.fail("a third")), LockHeldError);
    const parked = await metric("redlockd_parked_waiters");
    waiter = c.usingSemaphore(name, { permits: 2, ttlMs: 2000, waitMs: 15000 }, async (w) => {
      assert.ok(w.fencingToken > b.fencingToken);
      return w.slot;
    });
    await waitFor("the waiter to be parked", async () => (await metric("redlockd_parked_waiters")) > parked);
    return b.slot;
  }).catch(async (e: unknown) => {
    await a.release(); // a failure: let no permit keep the process alive
    throw e;
  });
  assert.equal(await waiter, slotB, "the waiter got the slot released at the routine's end");
  assert.equal(await a.release(), true);
  assert.equal((await c.semaphoreStatus(name)).held, 0);
  await assert.rejects(
    c.usingSemaphore(name, { permits: 2 }, async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal((await c.semaphoreStatus(name)).held, 0, "released when the routine threw");
});
