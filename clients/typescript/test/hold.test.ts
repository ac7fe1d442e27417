// hold.test.ts -- locks kept while you work (a duplex stream, or extensions): kept past their
// ttl, released by release() and `await using`, let go when the holder process dies or
// stops, lost (the signal aborts, with its reason) when released elsewhere or broken; a
// waiter the caller aborts is dropped.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, LeaseLostError, LockHeldError, type HeldLock } from "@redlockd/client";

import { Relay, TOKEN, client, metric, uniqueName, waitFor } from "./helpers.js";

/** Resolves with the lock's signal's reason once it aborts; rejects after timeoutMs. */
async function lossOf(lock: HeldLock, timeoutMs: number): Promise<unknown> {
  if (!lock.signal.aborted) {
    await once(lock.signal, "abort", { signal: AbortSignal.timeout(timeoutMs) });
  }
  return lock.signal.reason;
}

test("using: held past its ttl by the service's extensions, released after the routine", async () => {
  const c = client();
  const name = uniqueName("using");
  const result = await c.using(name, { ttlMs: 2000 }, async (lock, signal) => {
    assert.equal(signal, lock.signal);
    // The subject here is time passing: held for more than a ttl, by extensions only.
    const t0 = performance.now();
    await waitFor("more than a ttl", () => performance.now() - t0 > 2500);
    assert.ok(lock.extensions >= 3, `${lock.extensions} extensions`);
    assert.equal(signal.aborted, false, String(signal.reason));
    assert.equal(lock.held, true);
    assert.ok(lock.remainingMs > 0 && lock.remainingMs <= 2000, `remaining ${lock.remainingMs}`);
    const s = await c.status(name);
    assert.equal(s.held, true);
    assert.equal(s.fencingToken, lock.fencingToken);
    await assert.rejects(c.acquire(name), LockHeldError);
    return "done";
  });
  assert.equal(result, "done");
  assert.equal((await c.status(name)).held, false, "released when the routine ended");
});

test("using: released when the routine throws, and the error comes through", async () => {
  const c = client();
  const name = uniqueName("throws");
  let seen: HeldLock | undefined;
  await assert.rejects(
    c.using(name, async (lock) => {
      seen = lock;
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(seen?.held, false);
  assert.equal((await c.status(name)).held, false);
});

test("hold: release() answers true once, the lock is free, the signal stays quiet", async () => {
  const c = client();
  const name = uniqueName("release");
  const lock = await c.hold(name, { ttlMs: 5000 });
  assert.equal(await lock.release(), true);
  assert.equal(await lock.release(), true, "a second release returns the first answer");
  assert.equal(lock.held, false);
  assert.equal(lock.remainingMs, 0);
  assert.equal(lock.signal.aborted, false);
  const next = await c.acquire(name, { ttlMs: 2000 });
  assert.equal(next.fencingToken, lock.fencingToken + 1);
  await c.release(name, next.lease);
});

/** A holder process (holder-child.js) holding `name`; resolves once it has the grant. */
async function holderProcess(name: string, ttlMs: number): Promise<{ child: ReturnType<typeof spawn>; fencingToken: number; lines: AsyncIterableIterator<string> }> {
  const child = spawn(process.execPath, [fileURLToPath(new URL("./holder-child.js", import.meta.url)), name, String(ttlMs)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done === true) throw new Error("holder-child ended before the grant");
  return { child, fencingToken: (JSON.parse(first.value) as { fencingToken: number }).fencingToken, lines };
}

test("a holder process that dies (SIGKILL) lets the lock go once the validity it was told has run out", async () => {
  const c = client();
  const name = uniqueName("died");
  const { child, fencingToken } = await holderProcess(name, 2000);
  try {
    await assert.rejects(c.acquire(name), LockHeldError);
    child.kill("SIGKILL");
    const t0 = performance.now();
    // A hang-up without {"release":true} is released at the end of the validity last
    // told (about a ttl): the dead holder may have been counting on it.
    const g = await c.acquire(name, { ttlMs: 2000, waitMs: 10000 });
    const took = performance.now() - t0;
    assert.ok(took < 2000 + 3000, `granted ${took.toFixed(0)} ms after the holder died (ttl 2000)`);
    assert.equal(g.fencingToken, fencingToken + 1);
    await g.release();
  } finally {
    child.kill("SIGKILL");
  }
});

test("a stopped holder (SIGSTOP) loses the lock within about a ttl, and once continued its signal has aborted", async () => {
  const c = client();
  const name = uniqueName("stopped");
  const { child, fencingToken } = await holderProcess(name, 2000);
  const stderr: string[] = [];
  child.stderr!.on("data", (d: Buffer) => stderr.push(d.toString()));
  try {
    child.kill("SIGSTOP");
    const t0 = performance.now();
    const g = await c.acquire(name, { ttlMs: 2000, waitMs: 10000 });
    const took = performance.now() - t0;
    assert.ok(took < 2000 + 3000, `granted ${took.toFixed(0)} ms after the holder stopped (ttl 2000: the service releases a silent hold)`);
    assert.equal(g.fencingToken, fencingToken + 1);
    child.kill("SIGCONT");
    // Its timer fires as it resumes: it reports the loss and exits 3.
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 3, stderr.join(""));
    assert.match(stderr.join(""), /lost: LeaseLostError: lost the lock on /);
    await g.release();
  } finally {
    child.kill("SIGCONT");
    child.kill("SIGKILL");
  }
});

test("keepalive extend: held past its ttl by this client's PATCHes, then released", async () => {
  const c = client();
  const name = uniqueName("extend");
  const lock = await c.hold(name, { ttlMs: 2000, keepalive: "extend" });
  assert.equal(lock.keepalive, "extend");
  const t0 = performance.now();
  await waitFor("more than a ttl", () => performance.now() - t0 > 2500);
  assert.ok(lock.extensions >= 2, `${lock.extensions} extensions`);
  assert.equal(lock.held, true);
  assert.equal((await c.status(name)).held, true);
  assert.equal(await lock.release(), true);
  assert.equal((await c.status(name)).held, false);
});

test("keepalive extend: a lease broken by an admin (force) is a loss, reason lease_lost", async () => {
  const c = client();
  const name = uniqueName("extend-forced");
  const lock = await c.hold(name, { ttlMs: 900, keepalive: "extend" });
  await c.forceRelease(name);
  const reason = await lossOf(lock, 5000);
  assert.ok(reason instanceof LeaseLostError, String(reason));
  assert.equal(reason.reason, "lease_lost");
  assert.equal(await lock.release(), false);
});

test("await using: a held lock is released at the end of its scope, also when the scope throws", async () => {
  const c = client();
  const name = uniqueName("await-using");
  let seen: HeldLock | undefined;
  {
    await using lock = await c.hold(name, { ttlMs: 5000 });
    seen = lock;
    assert.equal((await c.status(name)).held, true);
  }
  assert.equal(seen.held, false);
  assert.equal((await c.status(name)).held, false);
  await assert.rejects(
    (async () => {
      await using lock = await c.hold(name, { ttlMs: 5000, keepalive: "extend" });
      seen = lock;
      throw new Error("inside");
    })(),
    /inside/,
  );
  assert.equal(seen.held, false);
  assert.equal((await c.status(name)).held, false);
});

test("released elsewhere (a DELETE with the lease): the signal aborts, reason released", async () => {
  const c = client();
  const name = uniqueName("elsewhere");
  const lock = await c.hold(name, { ttlMs: 5000 });
  await c.release(name, lock.lease);
  const reason = await lossOf(lock, 5000);
  assert.ok(reason instanceof LeaseLostError, String(reason));
  assert.equal(reason.code, "lock_lost");
  assert.equal(reason.reason, "released");
  assert.equal(lock.held, false);
  assert.equal(await lock.release(), false, "nothing left to release");
});

test("broken by an admin (force): the signal aborts, reason released", async () => {
  const c = client();
  const name = uniqueName("forced");
  const lock = await c.hold(name, { ttlMs: 900 });
  const res = await c.forceRelease(name);
  assert.deepEqual(res, { name, released: true, holds: 0, forced: true });
  const reason = await lossOf(lock, 5000);
  assert.ok(reason instanceof LeaseLostError, String(reason));
  // The service announces a forced break as a release, and says "released".
  assert.equal(reason.reason, "released");
});

test("the caller's signal: aborting a waiting hold drops the waiter, who is never handed the lock", async () => {
  const c = client();
  const name = uniqueName("abort-wait");
  const first = await c.acquire(name, { ttlMs: 30000 });
  const parked = await metric("redlockd_parked_waiters");
  const gone = await metric("redlockd_waiters_gone_total");
  const ac = new AbortController();
  const waiting = c.hold(name, { waitMs: 30000, signal: ac.signal });
  await waitFor("the waiter to be parked", async () => (await metric("redlockd_parked_waiters")) > parked);
  ac.abort(new Error("caller gave up"));
  await assert.rejects(waiting, /caller gave up/);
  await waitFor("the service to drop the waiter", async () => (await metric("redlockd_waiters_gone_total")) > gone);
  await c.release(name, first.lease);
  const next = await c.acquire(name, { ttlMs: 2000 });
  assert.equal(next.fencingToken, first.fencingToken + 1, "nobody was handed the lock in between");
  await c.release(name, next.lease);
});

test("the caller's signal: aborting a held lock releases it and aborts the lock's signal", async () => {
  const c = client();
  const name = uniqueName("abort-held");
  const ac = new AbortController();
  const lock = await c.hold(name, { ttlMs: 30000, signal: ac.signal });
  const why = new Error("shutting down the worker");
  ac.abort(why);
  assert.equal(lock.signal.reason, why);
  assert.equal(lock.held, false);
  assert.equal(await lock.release(), true);
  assert.equal((await c.status(name)).held, false);
});

test("an older service (a one-way stream): kept by this client's extensions, its lines only end it", async () => {
  const relay = await Relay.start(0, true);
  const c = new Client(relay.url, { token: TOKEN, retryCount: 0 });
  try {
    const name = uniqueName("one-way");
    const lock = await c.hold(name, { ttlMs: 2000 });
    assert.equal(lock.keepalive, "one-way");
    const t0 = performance.now();
    await waitFor("more than a ttl", () => performance.now() - t0 > 2500);
    assert.ok(lock.extensions >= 2, `${lock.extensions} extensions (PATCH)`);
    assert.equal(lock.held, true);
    await client().release(name, lock.lease); // a DELETE elsewhere: the stream says released
    const reason = await lossOf(lock, 5000);
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.ok(reason.reason === "released" || reason.reason === "lease_lost", reason.reason);
    const other = await c.hold(uniqueName("one-way-2"), { ttlMs: 5000 });
    assert.equal(await other.release(), true);
  } finally {
    c.close();
    await relay.close();
  }
});

test("a streamed hold whose grant was lost on the way: the retry, with a lease of its own, holds on", async () => {
  const relay = await Relay.start(1); // the first connection's answer never reaches the client
  const c = new Client(relay.url, { token: TOKEN, timeoutMs: 500, retryCount: 40, retryDelay: 100, retryJitter: 0 });
  try {
    const name = uniqueName("lost-grant");
    const lock = await c.hold(name, { ttlMs: 1000 });
    assert.ok(relay.connections >= 2, "the first try's answer was swallowed");
    // The lost grant's stream was let go at the validity it told; this one holds on.
    const t0 = performance.now();
    await waitFor("two ttls", () => performance.now() - t0 > 2000);
    assert.equal(lock.held, true, String(lock.signal.reason));
    assert.equal(await lock.release(), true);
  } finally {
    c.close();
    await relay.close();
  }
});
