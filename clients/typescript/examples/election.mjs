// election.mjs -- two campaigners for one leadership; the first resigns, the second leads.
import { Client } from "@redlockd/client";

const client = new Client();
const first = client.election("scheduler", { ttlMs: 3000 });
const leadership = await first.campaign("worker-1");
console.log(`worker-1 leads with fencing token ${leadership.fencingToken}`);

const second = client.election("scheduler", { ttlMs: 3000 });
const waiting = second.campaign("worker-2"); // waits in the service's queue
console.log("the leader:", (await second.leader())?.value);

await first.resign(); // hands the lock to the next campaigner at once
const next = await waiting;
console.log(`worker-2 leads with fencing token ${next.fencingToken}; worker-1 still leads: ${leadership.held}`);
next.signal.addEventListener("abort", () => console.log("worker-2 lost the lead:", next.signal.reason.reason));
await second.resign();
