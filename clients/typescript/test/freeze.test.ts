// freeze.test.ts -- three of the five masters stopped (SIGSTOP) under a held lock: the
// service cannot extend it, says so before the validity it announced ends, and the lock's
// signal aborts; a new acquire meanwhile is QuorumUnavailableError.  The masters are
// continued (SIGCONT) after, whatever happens.

import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import { LeaseLostError, QuorumUnavailableError, ReleaseUnconfirmedError } from "@redlockd/client";

import { client, uniqueName, waitFor, withFrozenMasters } from "./helpers.js";

test("frozen quorum: the held lock's signal aborts (no_quorum, or expired) before its validity ends", async () => {
  const c = client();
  const name = uniqueName("freeze");
  await c.using(name, { ttlMs: 1500 }, async (lock, signal) => {
    await waitFor("a first extension", () => lock.extensions >= 1);
    await withFrozenMasters(3, async () => {
      const validUntil = performance.now() + lock.remainingMs;
      if (!signal.aborted) await once(signal, "abort");
      const lostAt = performance.now();
      assert.ok(signal.reason instanceof LeaseLostError, String(signal.reason));
      // The service says `lost` a tenth of the ttl before the validity it told ends; this
      // client's own timer fires that margin before the same end: whichever comes first.
      assert.ok(signal.reason.reason === "no_quorum" || signal.reason.reason === "expired", signal.reason.reason);
      assert.ok(lostAt <= validUntil + 50, `lost ${(lostAt - validUntil).toFixed(0)} ms after the validity ended`);
      assert.equal(lock.held, false);
      assert.equal(lock.remainingMs, 0);

      const e = await c.acquire(uniqueName("freeze-other")).then(
        () => assert.fail("granted without a quorum"),
        (e: unknown) => e,
      );
      assert.ok(e instanceof QuorumUnavailableError, String(e));
      assert.equal(e.code, "quorum_unavailable");
      assert.equal(e.status, 503);
    });
  });
  // The masters are back: the name can be taken again.
  const g = await c.acquire(name, { ttlMs: 1000, waitMs: 5000 });
  await c.release(name, g.lease);
});

test("frozen quorum: a release is release_unconfirmed (ReleaseUnconfirmedError), and the service finishes it", async () => {
  const c = client();
  const name = uniqueName("unconfirmed");
  const plain = await c.acquire(name, { ttlMs: 20000 });
  const other = uniqueName("unconfirmed-held");
  const held = await c.hold(other, { ttlMs: 20000, keepalive: "extend" });
  const disposed = await c.acquire(uniqueName("unconfirmed-using"), { ttlMs: 20000 });
  await withFrozenMasters(3, async () => {
    const e = await plain.release().then(
      () => assert.fail("a release confirmed without a quorum"),
      (e: unknown) => e,
    );
    assert.ok(e instanceof ReleaseUnconfirmedError, String(e));
    assert.ok(e instanceof QuorumUnavailableError);
    assert.equal(e.code, "release_unconfirmed");
    assert.equal(e.status, 503);
    assert.equal(e.quorum, 3);
    assert.ok(e.nodesOk < 3, `nodes_ok ${e.nodesOk}`);
    assert.equal(await held.release(), false, "a kept lock's release says it was not confirmed");
    await disposed[Symbol.asyncDispose](); // no error: the service finishes it
  });
  // The masters are back: the service finished the releases, long before the 20 s ttl.
  await waitFor("the service to finish the release", async () => !(await c.status(name)).held, 15000);
  await waitFor("the service to finish the kept lock's release", async () => !(await c.status(other)).held, 15000);
});
