// loss.test.ts -- a holder's belief never outlives the lock (issue 29).  The holder keeps a
// lock through clients/stack.py's fault relay in front of instance A, the service's bytes
// to it delayed (0, 0.15, 0.8 s) or trickled; A is frozen (SIGSTOP: a VM pause) the moment
// the holder has the grant, or the relay trickles; another client polls instance B until
// granted.  The holder's signal must have aborted before that grant.
//
// The margin printed is the time between the loss (the signal's abort, as the holder saw
// it) and a moment known to precede the other grant: the send of its request, or the
// moment the lock's keys expire on a quorum of masters (PTTL, once A is frozen), whichever
// is later.  By design it is the drift allowance plus the round's time (about 32 ms at a
// 3 s ttl, the stack's default --drift-factor 0.01), less how late this process's timer
// fires; before the fix (validity counted from the receipt of a line) it was -780 ms at a
// 0.8 s delay.

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { Client, LeaseLostError, type Held } from "@redlockd/client";

import {
  KEY_PREFIX,
  RELAY_URL,
  SERVICE_PIDS,
  TOKEN,
  URL_B,
  grantElsewhere,
  quorumExpiry,
  relay,
  releaseElsewhere,
  sleep,
  uniqueName,
} from "./helpers.js";

const margins: string[] = [];

after(() => {
  if (margins.length > 0) process.stdout.write(`margins (loss signalled before another holder's grant):\n${margins.map((m) => `  ${m}\n`).join("")}`);
});

interface Case {
  what: string;
  delayMs: number;
  trickleMs?: number;
  keepalive: "stream" | "extend";
  sem?: boolean;
}

async function lossBeforeAnotherGrant(c: Case): Promise<void> {
  const name = uniqueName("slow");
  const holder = new Client(RELAY_URL, { token: TOKEN, retryCount: 0, timeoutMs: 4000 });
  await relay("reset");
  await relay(`delay down ${c.delayMs}`);
  let frozen = false;
  let other: { sent: number; lease: string } | undefined;
  let held: Held | undefined;
  let lostAt: number | undefined;
  try {
    held =
      c.sem === true
        ? await holder.holdSemaphore(name, { permits: 1, ttlMs: 3000, keepalive: c.keepalive })
        : await holder.hold(name, { ttlMs: 3000, keepalive: c.keepalive });
    const h = held;
    h.signal.addEventListener("abort", () => (lostAt = performance.now()));
    let expiry = -Infinity;
    if (c.trickleMs !== undefined) {
      await relay(`trickle down ${c.trickleMs}`);
    } else {
      process.kill(SERVICE_PIDS[0]!, "SIGSTOP");
      frozen = true;
      // What the frozen instance had written lands meanwhile; nobody extends the lock any
      // more.  The other grant comes after both this and the send of its request.
      await sleep(200);
      expiry = await quorumExpiry(KEY_PREFIX + (c.sem === true ? `#sem:${name}#0` : name));
    }
    other = await grantElsewhere(URL_B, name, { sem: c.sem === true });
    assert.ok(lostAt !== undefined, `${c.what}: another client was granted the lock and the holder's signal has not aborted`);
    const reason = h.signal.reason as LeaseLostError;
    assert.ok(reason instanceof LeaseLostError, String(reason));
    const margin = Math.max(other.sent, expiry) - lostAt;
    margins.push(`${c.what.padEnd(36)} ${margin.toFixed(0).padStart(5)} ms (${reason.reason})`);
    assert.ok(margin > 0, `${c.what}: loss signalled ${(-margin).toFixed(0)} ms after another holder's grant (${reason.reason})`);
  } finally {
    if (frozen) process.kill(SERVICE_PIDS[0]!, "SIGCONT");
    await relay("reset");
    if (other !== undefined) await releaseElsewhere(URL_B, name, other.lease, c.sem === true);
    await held?.release();
    holder.close();
  }
}

for (const delayMs of [0, 150, 800]) {
  test(`a streamed hold, delay ${delayMs} ms, instance frozen: loss signalled before another grant`, () =>
    lossBeforeAnotherGrant({ what: `stream, delay ${delayMs} ms`, delayMs, keepalive: "stream" }));
}

test("a streamed permit, delay 800 ms, instance frozen: loss signalled before another grant", () =>
  lossBeforeAnotherGrant({ what: "permit stream, delay 800 ms", delayMs: 800, keepalive: "stream", sem: true }));

for (const delayMs of [0, 800]) {
  test(`an extension-kept hold, delay ${delayMs} ms, instance frozen: loss signalled before another grant`, () =>
    lossBeforeAnotherGrant({ what: `extend, delay ${delayMs} ms`, delayMs, keepalive: "extend" }));
}

test("a streamed hold whose answers trickle in (a byte every 50 ms): loss signalled before another grant", () =>
  lossBeforeAnotherGrant({ what: "stream, trickle 50 ms/byte", delayMs: 0, trickleMs: 50, keepalive: "stream" }));

test("an extension-kept hold whose answers trickle in (a byte every 50 ms): loss signalled before another grant", () =>
  lossBeforeAnotherGrant({ what: "extend, trickle 50 ms/byte", delayMs: 0, trickleMs: 50, keepalive: "extend" }));

test("a stream cut by the relay: the signal aborts at once (disconnected)", async () => {
  const name = uniqueName("cut");
  const holder = new Client(RELAY_URL, { token: TOKEN, retryCount: 0 });
  await relay("reset");
  const lock = await holder.hold(name, { ttlMs: 3000 });
  try {
    const t0 = performance.now();
    await relay("cut");
    if (!lock.signal.aborted) await new Promise((r) => lock.signal.addEventListener("abort", r, { once: true }));
    const took = performance.now() - t0;
    const reason = lock.signal.reason as LeaseLostError;
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.equal(reason.reason, "disconnected");
    assert.ok(took < 1000, `signalled ${took.toFixed(0)} ms after the cut`);
    assert.equal(lock.held, false);
    assert.equal(await lock.release(), false, "nothing to release on a cut connection");
  } finally {
    await lock.release();
    holder.close();
  }
});
