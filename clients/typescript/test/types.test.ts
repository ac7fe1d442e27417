// types.test.ts -- the declarations (dist/index.d.ts) as a caller meets them: what compiles
// and what must not (each @ts-expect-error fails the build if the line compiles), and that
// every class and value they declare exists at run time.

import assert from "node:assert/strict";
import { test } from "node:test";

import * as api from "@redlockd/client";
import {
  Client,
  type ClientErrorCode,
  type ErrorCode,
  type Grant,
  type HeldLock,
  LockHeldError,
  type LossReason,
  type PermitGrant,
  RedlockError,
} from "@redlockd/client";

// Never called: only compiled.
export async function shapes(client: Client): Promise<void> {
  const n: number = await client.using("a", async (lock, signal) => {
    const token: number = lock.fencingToken;
    const aborted: boolean = signal.aborted;
    return aborted ? 0 : token;
  });
  const s: string = await client.using("a", { ttlMs: 1000, waitMs: 10, owner: "me", signal: AbortSignal.timeout(5) }, () => "sync");
  // @ts-expect-error -- an unknown option (ttl is ttlMs)
  await client.using("a", { ttl: 1000 }, async () => 1);
  // @ts-expect-error -- the routine is required
  await client.using("a", { ttlMs: 1000 });

  const g: Grant = await client.acquire("a", { ttlMs: 1000, lease: api.newLease(), owner: undefined });
  // @ts-expect-error -- a grant is read-only
  g.fencingToken = 2;
  await client.extend(g.name, g.lease, { ttlMs: 5000 });
  await client.release(g.name, g.lease);
  const st = await client.status("a", { index: "3", waitMs: 1000 });
  // @ts-expect-error -- an index is a string (it may exceed a JSON number)
  await client.status("a", { index: 3 });
  const owner: string | null = st.owner;

  const reader: HeldLock = await client.hold("a", { ttlMs: 3000, shared: true });
  const isReader: boolean = reader.shared;
  const slot: number = await client.usingSemaphore("p", { permits: 2, ttlMs: 1000 }, async (permit, sig) => (sig.aborted ? -1 : permit.slot));
  // @ts-expect-error -- permits is required
  await client.usingSemaphore("p", { ttlMs: 1000 }, async () => 1);
  // @ts-expect-error -- shared is for locks
  await client.acquirePermit("p", { permits: 2, shared: true });
  const pg: PermitGrant = await client.acquirePermit("p", { permits: 2 });
  const free: number | null = (await client.semaphoreStatus("p")).free;
  await client.extendPermit("p", pg.lease, { ttlMs: 1000 });
  await client.releasePermit("p", pg.lease);
  const lock: HeldLock = await client.hold("a", { ttlMs: 3000 });
  const released: boolean = await lock.release();
  const left: number = lock.remainingMs;

  try {
    await client.acquire("a");
  } catch (e) {
    if (e instanceof LockHeldError) {
      const ms: number = e.retryAfterMs;
      void ms;
    } else if (e instanceof api.PermitsMismatchError) {
      const inUse: number = e.permits;
      void inUse;
    } else if (e instanceof RedlockError) {
      const code: ErrorCode | ClientErrorCode = e.code;
      if (e instanceof api.LeaseLostError) {
        const why: LossReason | undefined = e.reason;
        void why;
      }
      void code;
    }
  }
  // The new shapes (issue 27): sets, reentrant holds, force, watch, elections, retries.
  const set: api.LockSet = await client.acquireMany(["a", "b"], { modes: { b: "shared" }, ttlMs: 1000, retryCount: 3, retryJitter: 50 });
  const tokenA: number | undefined = set.fencingTokens["a"];
  // @ts-expect-error -- a mode is shared or exclusive
  await client.acquireMany(["a"], { modes: { a: "read" } });
  const kept: api.HeldLockSet = await client.holdMany(["a", "b"], { ttlMs: 1000 });
  const how: "stream" | "extend" | "one-way" = kept.keepalive;
  const again: api.Lock = await client.acquire("a", { lease: set.lease, reentrant: true });
  const r: api.Released = await again.release();
  const holdsLeft: number = r.holds;
  await client.forceRelease("a");
  for await (const state of client.watch("a", { signal: AbortSignal.timeout(10) })) void state.index;
  const election: api.Election = client.election("leader", { ttlMs: 3000 });
  const leadership: HeldLock = await election.campaign("me", { signal: AbortSignal.timeout(10) });
  const leader: api.Leader | null = await election.leader();
  for await (const l of election.observe()) void l?.value;
  const resigned: boolean = await election.resign();
  // @ts-expect-error -- keepalive is stream or extend
  await client.hold("a", { keepalive: "poll" });
  const c2 = new api.Client({ retryCount: -1, retryDelay: 100, retryJitter: 0, timeoutMs: 500, tls: { rejectUnauthorized: true } });
  const h: api.Health = await c2.ready();
  {
    await using held = await client.hold("a");
    await using plain = await client.acquire("a");
    void [held.signal, plain.fencingToken];
  }
  void [n, s, owner, released, left, isReader, slot, free, tokenA, how, holdsLeft, leadership, leader, resigned, h];
}

test("every value the declarations export exists at run time", () => {
  for (const cls of [api.Client, api.Election, api.Lock, api.Permit, api.LockSet, api.RedlockError, api.LockHeldError, api.QuorumUnavailableError, api.LeaseLostError, api.UnauthorizedError, api.PermitsMismatchError]) {
    assert.equal(typeof cls, "function");
  }
  assert.ok(new api.LockHeldError("lock_held", "m", 5) instanceof api.RedlockError);
  assert.equal(new api.PermitsMismatchError("m", 3).code, "permits_mismatch");
  assert.ok(new api.LeaseLostError("lock_lost", "m") instanceof Error);
  assert.equal(new api.UnauthorizedError("forbidden", "m").name, "UnauthorizedError");
  assert.match(api.newLease(), /^[A-Za-z0-9_-]{32}$/);
  assert.ok(api.isErrorCode("lock_held") && !api.isErrorCode("lock_lost"));
  assert.ok(Array.isArray(api.ERROR_CODES));
});
