// await-using.ts -- a lock kept for a scope (TypeScript >= 5.2 compiles `await using`).
import { Client } from "@redlockd/client";

const client = new Client();
{
  await using lock = await client.hold("nightly-report", { ttlMs: 2000 });
  console.log(`holding ${lock.name} with token ${lock.fencingToken}, kept by ${lock.keepalive}`);
  await new Promise((r) => setTimeout(r, 3000)); // longer than the ttl: the service keeps it
  console.log(`3 s later: held ${lock.held}, lost ${lock.signal.aborted}`);
}
console.log(`after the scope: held ${(await client.status("nightly-report")).held}`);
