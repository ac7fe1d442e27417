// hold.test.ts -- locks held while connected (hold=stream): kept past their ttl, released
// by release() and by a closed connection, lost (the signal aborts, with its reason) when
// released elsewhere or broken; a waiter the caller aborts is dropped.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { LeaseLostError, LockHeldError, type HeldLock } from "@redlockd/client";

import { TOKEN, URL_, client, metric, uniqueName, waitFor } from "./helpers.js";

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
  const result = await c.using(name, { ttlMs: 600 }, async (lock, signal) => {
    assert.equal(signal, lock.signal);
    // The subject here is time passing: held for one and a half ttls, by extensions only.
    const t0 = performance.now();
    await waitFor("one and a half ttls", () => performance.now() - t0 > 900);
    assert.ok(lock.extensions >= 3, `${lock.extensions} extensions`);
    assert.equal(signal.aborted, false);
    assert.equal(lock.held, true);
    assert.ok(lock.remainingMs > 0 && lock.remainingMs <= 600);
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
  const next = await c.acquire(name, { ttlMs: 1000 });
  assert.equal(next.fencingToken, lock.fencingToken + 1);
  await c.release(name, next.lease);
});

test("a holder process that dies lets the lock go at once (its connection closed)", async () => {
  const c = client();
  const name = uniqueName("died");
  const child = spawn(process.execPath, [fileURLToPath(new URL("./holder-child.js", import.meta.url)), name, "60000"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
    const held = JSON.parse(line) as { fencingToken: number };
    await assert.rejects(c.acquire(name), LockHeldError);
    child.kill("SIGKILL");
    const t0 = performance.now();
    const g = await c.acquire(name, { ttlMs: 1000, waitMs: 10000 });
    assert.ok(performance.now() - t0 < 10000, "granted long before the dead holder's 60 s ttl");
    assert.equal(g.fencingToken, held.fencingToken + 1);
    await c.release(name, g.lease);
  } finally {
    child.kill("SIGKILL");
  }
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
  const res = await fetch(`${URL_}/locks/${encodeURIComponent(name)}?force=true`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(res.status, 200, await res.text());
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
  const next = await c.acquire(name, { ttlMs: 1000 });
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
