// locks.test.ts -- the plain calls against the real service: acquire, status, extend,
// release, list, reentrant holds, force, watch, health; a Lock's own extend, release and
// `await using`; waiting with waitMs; the retry settings; an acquire whose answer was
// lost, retried with the same lease; the whole-call deadline; the default URL.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, DEFAULT_URL, LeaseLostError, LockHeldError, RedlockError, newLease } from "@redlockd/client";

import { RELAY_URL, Relay, TOKEN, client, metric, relay, uniqueName, waitFor } from "./helpers.js";

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
    const viaRelay = new Client(relay.url, { token: TOKEN, timeoutMs: 500, retryCount: 2, retryDelay: 50, retryJitter: 0 });
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
    const viaRelay = new Client(relay.url, { token: TOKEN, timeoutMs: 500, retryCount: 0 });
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

test("a Lock extends and releases itself; remainingMs counts from the send", async () => {
  const c = client();
  const name = uniqueName("lock-object");
  const t0 = performance.now();
  const lock = await c.acquire(name, { ttlMs: 3000 });
  assert.ok(lock.sentAt >= t0 && lock.sentAt <= performance.now());
  assert.ok(lock.remainingMs <= lock.validityMs - (performance.now() - lock.sentAt) + 1);
  const x = await lock.extend({ ttlMs: 20000 });
  assert.equal(x.fencingToken, lock.fencingToken);
  assert.ok(lock.remainingMs > 3000, `remaining ${lock.remainingMs}`);
  assert.deepEqual(await lock.release(), { name, released: true, holds: 0, forced: false });
  assert.equal(lock.remainingMs, 0);
  await assert.rejects(lock.release(), (e: unknown) => e instanceof LeaseLostError && e.code === "lease_not_found");
});

test("await using: an acquired lock is released at the end of its scope", async () => {
  const c = client();
  const name = uniqueName("using-acquire");
  {
    await using lock = await c.acquire(name, { ttlMs: 10000 });
    assert.equal((await c.status(name)).fencingToken, lock.fencingToken);
    assert.equal((await c.status(name)).held, true);
  }
  assert.equal((await c.status(name)).held, false);
});

test("reentrant: the holder's lease takes the lock again (same token); each release takes one hold back", async () => {
  const c = client();
  const name = uniqueName("reentrant");
  const first = await c.acquire(name, { ttlMs: 10000 });
  assert.equal(first.holds, 1);
  const second = await c.acquire(name, { lease: first.lease, reentrant: true });
  assert.equal(second.holds, 2);
  assert.equal(second.fencingToken, first.fencingToken);
  assert.equal((await c.status(name, { lease: first.lease })).holds, 2);
  assert.equal((await c.status(name)).holds, undefined, "only the lease's holder sees the count");
  assert.deepEqual(await c.release(name, first.lease), { name, released: false, holds: 1, forced: false });
  assert.equal((await c.status(name)).held, true);
  assert.deepEqual(await c.release(name, first.lease), { name, released: true, holds: 0, forced: false });
  assert.equal((await c.status(name)).held, false);
  const e = await c.acquire(name, { lease: newLease(), reentrant: true, shared: true }).catch((e: unknown) => e);
  assert.ok(e instanceof RedlockError && e.code === "invalid_reentrant", String(e));
});

test("forceRelease: breaks the lock whatever its lease; the holder's lease is gone", async () => {
  const c = client();
  const name = uniqueName("force");
  const g = await c.acquire(name, { ttlMs: 30000 });
  assert.deepEqual(await c.forceRelease(name), { name, released: true, holds: 0, forced: true });
  assert.equal((await c.status(name)).held, false);
  await assert.rejects(c.extend(name, g.lease), (e: unknown) => e instanceof LeaseLostError && e.code === "lease_not_found");
  const next = await c.acquire(name, { ttlMs: 1000 });
  assert.ok(next.fencingToken > g.fencingToken, "the next holder's token is larger: the broken one is fenced off");
  await next.release();
});

test("watch: the state now, then each change, until the signal aborts", async () => {
  const c = client();
  const name = uniqueName("watch-iter");
  const ac = new AbortController();
  const seen: Array<[boolean, number]> = [];
  const watching = (async () => {
    for await (const s of c.watch(name, { signal: ac.signal, waitMs: 10000 })) {
      seen.push([s.held, s.fencingToken]);
      if (seen.length === 3) ac.abort(new Error("enough"));
    }
  })();
  await waitFor("the first state", () => seen.length >= 1);
  const g = await c.acquire(name, { ttlMs: 10000 });
  await waitFor("the grant seen", () => seen.length >= 2);
  await g.release();
  await assert.rejects(watching, /enough/);
  assert.deepEqual(seen, [
    [false, 0],
    [true, g.fencingToken],
    [false, g.fencingToken],
  ]);
});

test("retry settings: a held lock is tried retryCount more times, retryDelay ± retryJitter apart", async () => {
  const c = client({ retryCount: 3, retryDelay: 150, retryJitter: 0 });
  const name = uniqueName("retry-held");
  const holder = await c.acquire(name, { ttlMs: 10000, retryCount: 0 });
  const t0 = performance.now();
  await assert.rejects(c.acquire(name), LockHeldError);
  const took = performance.now() - t0;
  assert.ok(took >= 3 * 150 && took < 3 * 150 + 2000, `4 tries 150 ms apart took ${took.toFixed(0)} ms`);
  // A lock released while the retries go on is granted to them.
  setTimeout(() => void holder.release(), 300);
  const t1 = performance.now();
  const g = await c.acquire(name, { retryCount: 10, retryDelay: 100, retryJitter: 50 });
  assert.ok(performance.now() - t1 >= 250, "granted after the release");
  assert.equal(g.fencingToken, holder.fencingToken + 1);
  await g.release();
  // With a wait, the service waited: a 409 after it is final (no retries).
  const h2 = await c.acquire(name, { ttlMs: 10000 });
  const t2 = performance.now();
  await assert.rejects(c.acquire(name, { waitMs: 200, retryCount: 5, retryDelay: 1000 }), LockHeldError);
  assert.ok(performance.now() - t2 < 1000, "no retry after the service's wait");
  await h2.release();
});

test("the default URL: REDLOCK_URL, else http://127.0.0.1:8080; the token: REDLOCK_TOKEN", () => {
  const saved = { url: process.env["REDLOCK_URL"], token: process.env["REDLOCK_TOKEN"] };
  try {
    delete process.env["REDLOCK_URL"];
    assert.equal(new Client().url, DEFAULT_URL);
    assert.equal(DEFAULT_URL, "http://127.0.0.1:8080");
    process.env["REDLOCK_URL"] = "http://127.0.0.1:1/";
    assert.equal(new Client().url, "http://127.0.0.1:1");
    assert.equal(new Client({ url: "http://127.0.0.1:2" }).url, "http://127.0.0.1:2");
    assert.equal(new Client("http://127.0.0.1:3").url, "http://127.0.0.1:3");
  } finally {
    if (saved.url === undefined) delete process.env["REDLOCK_URL"];
    else process.env["REDLOCK_URL"] = saved.url;
  }
});

test("REDLOCK_URL and REDLOCK_TOKEN are enough to reach the stack", async () => {
  const saved = process.env["REDLOCK_TOKEN"];
  process.env["REDLOCK_TOKEN"] = TOKEN;
  try {
    const c = new Client();
    const s = await c.status(uniqueName("env"));
    assert.equal(s.held, false);
    c.close();
  } finally {
    if (saved === undefined) delete process.env["REDLOCK_TOKEN"];
    else process.env["REDLOCK_TOKEN"] = saved;
  }
});

test("health, ready and metrics", async () => {
  const c = client();
  const h = await c.health();
  assert.equal(h.ready, true);
  assert.equal(h.quorum, 3);
  assert.equal(h.masters.length, 5);
  assert.ok(h.masters.every((m) => m.ok && m.state === "ready"));
  assert.equal((await c.ready()).ready, true);
  assert.match(await c.metrics(), /^redlockd_parked_waiters \d+$/m);
});

test("a whole-call deadline: an answer that trickles in is abandoned at timeoutMs", async () => {
  const slow = new Client(RELAY_URL, { token: TOKEN, timeoutMs: 400, retryCount: 0 });
  await relay("reset");
  await relay("trickle down 50");
  try {
    const t0 = performance.now();
    const e = await slow.status(uniqueName("trickle")).catch((e: unknown) => e);
    const took = performance.now() - t0;
    assert.ok(e instanceof RedlockError && e.code === "timeout", String(e));
    assert.ok(took >= 390 && took < 2000, `abandoned after ${took.toFixed(0)} ms`);
  } finally {
    await relay("reset");
    slow.close();
  }
});
