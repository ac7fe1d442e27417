// holder-child.ts -- a process that holds a lock (hold=stream) until it is killed; prints
// the grant as one JSON line.  For hold.test.ts: a holder that dies lets the lock go.
// Usage: node holder-child.js NAME TTL_MS

import { client } from "./helpers.js";

const [name, ttl] = process.argv.slice(2);
const lock = await client().hold(name!, { ttlMs: Number(ttl) });
process.stdout.write(JSON.stringify({ lease: lock.lease, fencingToken: lock.fencingToken }) + "\n");
lock.signal.addEventListener("abort", () => {
  process.stderr.write(`holder-child: lost: ${String(lock.signal.reason)}\n`);
  process.exit(3);
});
