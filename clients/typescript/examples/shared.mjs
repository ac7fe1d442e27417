import { Client, LockHeldError, PermitsMismatchError } from "@redlockd/client";

const client = new Client();
const readers = await Promise.all([1, 2].map(() => client.hold("reports", { shared: true })));
const writer = await client.acquire("reports", { retryCount: 0 }).catch((e) => e);
console.log(`readers: ${(await client.status("reports")).readers}; a writer: ${writer instanceof LockHeldError ? writer.code : "granted"}`);
await Promise.all(readers.map((r) => r.release()));

await client.usingSemaphore("pool/db", { permits: 2 }, async (permit, signal) => {
  console.log(`permit in slot ${permit.slot}, fencing token ${permit.fencingToken}`);
  const other = await client.acquirePermit("pool/db", { permits: 3 }).catch((e) => e);
  if (other instanceof PermitsMismatchError) console.log(`permits 3: ${other.code}, in use: ${other.permits}`);
  console.log(await client.semaphoreStatus("pool/db"), "lost:", signal.aborted);
});
console.log(await client.semaphoreStatus("pool/db"));
