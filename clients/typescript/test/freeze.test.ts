// freeze.test.ts -- three of the five masters stopped (SIGSTOP) under a held lock: the
// service cannot extend it, says so before the validity it announced ends, and the lock's
// signal aborts; a new acquire meanwhile is QuorumUnavailableError.  The masters are
// continued (SIGCONT) after, whatever happens.

import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import { LeaseLostError, QuorumUnavailableError } from "@redlockd/client";

import { client, uniqueName, waitFor, withFrozenMasters } from "./helpers.js";

test("frozen quorum: the held lock's signal aborts (no_quorum) before its validity ends", async () => {
  const c = client();
  const name = uniqueName("freeze");
  await c.using(name, { ttlMs: 1500 }, async (lock, signal) => {
    await waitFor("a first extension", () => lock.extensions >= 1);
    await withFrozenMasters(3, async () => {
      const validUntil = performance.now() + lock.remainingMs;
      if (!signal.aborted) await once(signal, "abort");
      const lostAt = performance.now();
      assert.ok(signal.reason instanceof LeaseLostError, String(signal.reason));
      assert.equal(signal.reason.reason, "no_quorum");
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
