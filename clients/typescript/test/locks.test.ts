// locks.test.ts -- the plain calls against the real service: acquire, status, extend,
// release, list; waiting with waitMs; an acquire whose answer was lost, retried with the
// same lease.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, LockHeldError, RedlockError, newLease } from "@redlockd/client";

import { Relay, TOKEN, client, metric, uniqueName, waitFor } from "./helpers.js";

test("acquire, status, extend, release: the grant's lease and fencing token", async () => {
  const c = client();
  const name = uniqueName("basic/with/slashes");
  const g = await c.acquire(name, { ttlMs: 5000, owner: "ts-test pid " + process.pid });
  assert.equal(g.name, name);
  assert.match(g.lease, /^[A-Za-z0-9_-]{32}$/);
  assert.ok(g.fencingToken >= 1);
  assert.ok(g.validityMs > 0 && g.validityMs <= 5000);
  assert.equal(g.ttlMs, 5000);

  const s = await c.status(name);
  assert.deepEqual({ held: s.held, owner: s.owner, fencingToken: s.fencingToken }, {
    held: true,
    owner: "ts-test pid " + process.pid,
    fencingToken: g.fencingToken,
  });

  const x = await c.extend(name, g.lease, { ttlMs: 20000 });
  assert.equal(x.fencingToken, g.fencingToken);
  assert.ok(x.validityMs > 5000, `extended validity ${x.validityMs}`);

  await c.release(name, g.lease);
  const after = await c.status(name);
  assert.equal(after.held, false);
  assert.notEqual(after.index, s.index);

  const again = await c.acquire(name, { ttlMs: 5000 });
  assert.ok(again.fencingToken > g.fencingToken, "a later grant has a larger fencing token");
  await c.release(name, again.lease);
});

test("a held lock: LockHeldError with retryAfterMs at once, without waitMs", async () => {
  const c = client();
  const name = uniqueName("held");
  const g = await c.acquire(name, { ttlMs: 8000 });
  try {
    const e = await c.acquire(name).then(
      () => assert.fail("granted twice"),
      (e: unknown) => e,
    );
    assert.ok(e instanceof LockHeldError, String(e));
    assert.equal(e.code, "lock_held");
    assert.equal(e.status, 409);
    assert.ok(e.retryAfterMs > 0 && e.retryAfterMs <= 8000, `retryAfterMs ${e.retryAfterMs}`);
  } finally {
    await c.release(name, g.lease);
  }
});

test("waitMs: the acquire waits, parked, and is granted at the holder's release", async () => {
  const c = client();
  const name = uniqueName("wait");
  const first = await c.acquire(name, { ttlMs: 30000 });
  const parkedBefore = await metric("redlockd_parked_waiters");
  let settled = false;
  const waiter = c.acquire(name, { ttlMs: 5000, waitMs: 20000 }).finally(() => (settled = true));
  await waitFor("the waiter to be parked", async () => (await metric("redlockd_parked_waiters")) > parkedBefore);
  assert.equal(settled, false, "the waiter did not wait");
  await c.release(name, first.lease);
  const second = await waiter;
  assert.equal(second.fencingToken, first.fencingToken + 1);
  await c.release(name, second.lease);
});

test("list: the held locks under a prefix, with their owners", async () => {
  const c = client();
  const prefix = uniqueName("list") + "/";
  const a = await c.acquire(prefix + "a", { ttlMs: 10000, owner: "owner-a" });
  const b = await c.acquire(prefix + "b", { ttlMs: 10000 });
  try {
    const l = await c.list({ prefix });
    assert.equal(l.prefix, prefix);
    assert.equal(l.truncated, false);
    assert.deepEqual(
      l.locks.map((x) => [x.name, x.owner, x.fencingToken]),
      [
        [prefix + "a", "owner-a", a.fencingToken],
        [prefix + "b", null, b.fencingToken],
      ],
    );
  } finally {
    await c.release(prefix + "a", a.lease);
    await c.release(prefix + "b", b.lease);
  }
});

test("status with index and waitMs: answers at the next change", async () => {
  const c = client();
  const name = uniqueName("watch");
  const s0 = await c.status(name);
  const watch = c.status(name, { index: s0.index, waitMs: 20000 });
  const g = await c.acquire(name, { ttlMs: 5000 });
  const s1 = await watch;
  assert.notEqual(s1.index, s0.index);
  assert.equal(s1.held, true);
  assert.equal(s1.fencingToken, g.fencingToken);
  await c.release(name, g.lease);
});

test("an acquire whose answer was lost is retried with the same lease: the same grant", async () => {
  const name = uniqueName("retry");
  // The first connection reaches the service, but its answer never reaches the client.
  const relay = await Relay.start(1);
  try {
    const c = client();
    const viaRelay = new Client(relay.url, { token: TOKEN, timeoutMs: 500, retries: 2 });
    const g = await viaRelay.acquire(name, { ttlMs: 10000 });
    assert.equal(relay.connections, 2, "one lost answer, one retry");
    const lost = relay.swallowedBody(0) as { lease: string; fencing_token: number };
    assert.equal(g.lease, lost.lease, "the retry used the first attempt's lease");
    assert.equal(g.fencingToken, lost.fencing_token, "and got the first attempt's grant back");
    const s = await c.status(name);
    assert.equal(s.fencingToken, g.fencingToken, "no second grant happened");
    await c.release(name, g.lease);
  } finally {
    await relay.close();
  }
});

test("without retries a lost answer is a timeout, and the lost grant holds the lock", async () => {
  const name = uniqueName("noretry");
  const relay = await Relay.start(1);
  try {
    const viaRelay = new Client(relay.url, { token: TOKEN, timeoutMs: 500, retries: 0 });
    const lease = newLease();
    const e = await viaRelay.acquire(name, { ttlMs: 10000, lease }).then(
      () => assert.fail("an answer came through"),
      (e: unknown) => e,
    );
    assert.ok(e instanceof RedlockError && e.code === "timeout", String(e));
    // A fresh lease finds the lock held by the lost grant ...
    const c = client();
    await assert.rejects(c.acquire(name), LockHeldError);
    // ... and the lease of the lost attempt gets it back.
    const g = await c.acquire(name, { ttlMs: 10000, lease });
    assert.equal(g.fencingToken, (relay.swallowedBody(0) as { fencing_token: number }).fencing_token);
    await c.release(name, lease);
  } finally {
    await relay.close();
  }
});
