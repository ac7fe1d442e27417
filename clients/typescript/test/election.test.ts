// election.test.ts -- an Election (etcd's shape): campaign until elected, the leader seen
// by leader() and observe(), resign hands it to the next campaigner at once, a campaign
// the caller aborts ends, a leadership broken by an admin is signalled.

import assert from "node:assert/strict";
import { test } from "node:test";

import { LeaseLostError, type Leader } from "@redlockd/client";

import { client, uniqueName, waitFor } from "./helpers.js";

test("campaign, leader, resign: the second campaigner is elected at the first one's resignation", async () => {
  const c = client();
  const name = uniqueName("election");
  const e1 = c.election(name, { ttlMs: 2000 });
  const e2 = c.election(name, { ttlMs: 2000 });
  assert.equal(await e1.leader(), null);
  const l1 = await e1.campaign("alpha");
  assert.equal(e1.leadership, l1);
  const seen = await e1.leader();
  assert.deepEqual([seen?.value, seen?.fencingToken], ["alpha", l1.fencingToken]);
  assert.ok(seen!.validityMs > 0 && seen!.validityMs <= 2000);
  let elected2 = false;
  const ac = new AbortController();
  const campaigning = e2.campaign("beta", { signal: ac.signal }).then((l) => {
    elected2 = true;
    return l;
  });
  try {
    // Kept past its ttl while the other waits.
    const t0 = performance.now();
    await waitFor("a ttl and a half", () => performance.now() - t0 > 3000, 5000);
    assert.equal(elected2, false);
    assert.equal(l1.held, true, String(l1.signal.reason));
    const t1 = performance.now();
    assert.equal(await e1.resign(), true);
    const l2 = await campaigning;
    assert.ok(performance.now() - t1 < 2000, "handed over at the resignation");
    assert.equal(l2.fencingToken, l1.fencingToken + 1);
    assert.equal((await e2.leader())?.value, "beta");
    assert.equal(e1.leadership, undefined);
    await e2.resign();
    assert.equal(await e2.leader(), null);
  } finally {
    ac.abort();
    await campaigning.catch(() => {});
    await e1.resign();
    await e2.resign();
  }
});

test("observe: the leader now, then each change", async () => {
  const c = client();
  const name = uniqueName("observe");
  const e = c.election(name, { ttlMs: 3000 });
  const ac = new AbortController();
  const seen: Array<Leader | null> = [];
  // Each watching request waits 2 s at most: an announcement the service missed (DESIGN
  // section 11: they can be lost) then costs 2 s, not the default 30.
  const observing = (async () => {
    for await (const l of e.observe({ signal: ac.signal, waitMs: 2000 })) seen.push(l);
  })();
  try {
    await waitFor("the first observation", () => seen.length >= 1);
    const l1 = await e.campaign("one");
    await waitFor("the leader observed", () => seen.length >= 2);
    await e.resign();
    const l2 = await e.campaign("two");
    await waitFor("the new leader observed", () => seen.at(-1)?.value === "two");
    // None, then "one", then (if a watch answered between the resignation and the next
    // grant) none, then "two".
    assert.equal(seen[0], null);
    assert.deepEqual(
      seen.flatMap((l) => (l === null ? [] : [[l.value, l.fencingToken]])),
      [
        ["one", l1.fencingToken],
        ["two", l2.fencingToken],
      ],
    );
    assert.ok(seen.length <= 4, JSON.stringify(seen));
  } finally {
    ac.abort();
    await observing.catch(() => {});
    await e.resign();
  }
});

test("a campaign the caller aborts rejects with its reason; a leadership broken by an admin is signalled", async () => {
  const c = client();
  const name = uniqueName("abort-campaign");
  const leader = await c.election(name, { ttlMs: 2000 }).campaign("incumbent");
  const ac = new AbortController();
  const waiting = c.election(name).campaign("challenger", { signal: ac.signal });
  setTimeout(() => ac.abort(new Error("no longer interested")), 200);
  await assert.rejects(waiting, /no longer interested/);
  await c.forceRelease(name);
  if (!leader.signal.aborted) await new Promise((r) => leader.signal.addEventListener("abort", r, { once: true }));
  assert.ok(leader.signal.reason instanceof LeaseLostError, String(leader.signal.reason));
  await leader.release();
});
