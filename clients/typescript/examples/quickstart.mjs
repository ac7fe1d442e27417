import { Client } from "@redlockd/client";

const client = new Client(); // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
const total = await client.using("reports", { ttlMs: 10000, waitMs: 5000 }, async (lock, signal) => {
  console.log(`holding ${lock.name}, fencing token ${lock.fencingToken}`);
  let rows = 0;
  for (let i = 0; i < 3 && !signal.aborted; i++) rows += 100; // stop when signal aborts: the lock is lost
  return rows;
});
console.log(`done: ${total} rows; released`);
