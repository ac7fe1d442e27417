// fencing.mjs -- the fencing token put to use.  The protected resource is a Redis key
// (RESOURCE_PORT, default 6379) written only by a Lua check-and-set that refuses a token
// older than the last one it accepted.  A holder that pauses past its lock's validity
// (a GC or VM pause) wakes up believing it still holds the lock: its write is refused.
import { Client } from "@redlockd/client";
import { connect } from "./resp.mjs";

// Accept the write if its token is at least the last accepted one, and remember it.
const CHECK_AND_SET = `
local last = tonumber(redis.call('GET', KEYS[1] .. ':token') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1] .. ':token', ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1`;

const resource = await connect(Number(process.env.RESOURCE_PORT ?? 6379));
/** @param {number} token @param {string} value */
const write = async (token, value) =>
  (await resource.call("EVAL", CHECK_AND_SET, 1, "report", token, value)) === 1 ? "accepted" : "REFUSED";

const client = new Client();
const a = await client.acquire("report", { ttlMs: 1000 });
console.log(`A holds "report" with token ${a.fencingToken}: its write is ${await write(a.fencingToken, "A's")}`);

await new Promise((r) => setTimeout(r, 1500)); // A pauses past its validity; the lock expires

const b = await client.acquire("report", { ttlMs: 5000, waitMs: 5000 });
console.log(`B holds "report" with token ${b.fencingToken}: its write is ${await write(b.fencingToken, "B's")}`);
console.log(`A wakes up and writes with token ${a.fencingToken}: its write is ${await write(a.fencingToken, "A's late")}`);
console.log(`the resource holds ${await resource.call("GET", "report")} write, token ${await resource.call("GET", "report:token")}`);
await b.release();
resource.close();
