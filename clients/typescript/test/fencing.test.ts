// fencing.test.ts -- the fencing token put to use against a real store: a redis-server
// started here is the protected resource, written by a Lua check-and-set that refuses a
// token older than the last one it accepted.  A holder process frozen with SIGSTOP (its
// lock released for silence, then granted to another) writes when continued: refused.
// And examples/fencing.mjs, run against it, prints what the README shows.

import assert from "node:assert/strict";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { TOKEN, URL_, client, redisCommand, uniqueName, waitFor } from "./helpers.js";

const examples = fileURLToPath(new URL("../../examples/", import.meta.url));
let redis: ChildProcess | undefined;
let port = 0;

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

before(async () => {
  for (let i = 0; i < 5 && redis === undefined; i++) {
    port = await freePort();
    const p = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    const up = await waitFor(
      "redis-server to answer",
      async () => (p.exitCode !== null ? "exited" : (await redisCommand(port, "PING").catch(() => "")).startsWith("+PONG") ? "up" : undefined),
      10000,
    );
    if (up === "up") redis = p;
  }
  assert.ok(redis !== undefined, "could not start redis-server");
});

after(() => {
  redis?.kill("SIGKILL");
});

const CHECK_AND_SET = `
local last = tonumber(redis.call('GET', KEYS[1] .. ':token') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1] .. ':token', ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1`;

async function write(key: string, token: number, value: string): Promise<boolean> {
  const r = await redisCommand(port, "EVAL", CHECK_AND_SET, "1", key, String(token), value);
  return r.trim() === ":1";
}

test("a frozen holder's write, once another holds the lock, is refused by the resource", async () => {
  const name = uniqueName("fenced");
  const key = "resource:" + name;
  // The holder: holds NAME, writes with its token each time it reads a line on stdin.
  const code = `
    import { Client } from "@redlockd/client";
    import { createInterface } from "node:readline";
    import { connect } from ${JSON.stringify(examples + "resp.mjs")};
    const r = await connect(${port});
    const lock = await new Client(${JSON.stringify(URL_)}, { token: ${JSON.stringify(TOKEN)} }).hold(${JSON.stringify(name)}, { ttlMs: 1000 });
    console.log(JSON.stringify({ token: lock.fencingToken }));
    for await (const _ of createInterface({ input: process.stdin })) {
      const ok = await r.call("EVAL", ${JSON.stringify(CHECK_AND_SET)}, 1, ${JSON.stringify(key)}, lock.fencingToken, "holder");
      console.log(JSON.stringify({ wrote: ok === 1, held: lock.held }));
    }`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], { stdio: ["pipe", "pipe", "inherit"], cwd: fileURLToPath(new URL("../..", import.meta.url)) });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string) as { token?: number; wrote?: boolean; held?: boolean };
  try {
    const { token } = await next();
    child.stdin!.write("go\n");
    assert.deepEqual(await next(), { wrote: true, held: true });
    child.kill("SIGSTOP");
    const c = client();
    const b = await c.acquire(name, { ttlMs: 5000, waitMs: 10000 });
    assert.ok(b.fencingToken > token!);
    assert.equal(await write(key, b.fencingToken, "other"), true);
    child.kill("SIGCONT");
    child.stdin!.write("go\n");
    // It believes nothing any more (its timer fired as it resumed), and its write is refused.
    assert.deepEqual(await next(), { wrote: false, held: false });
    assert.equal((await redisCommand(port, "GET", key)).split("\r\n")[1], "other");
    await b.release();
  } finally {
    child.kill("SIGCONT");
    child.kill("SIGKILL");
    await once(child, "exit").catch(() => {});
  }
});

test("examples/fencing.mjs: the paused holder's write is refused", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [examples + "fencing.mjs"], {
    env: { ...process.env, REDLOCK_TOKEN: TOKEN, RESOURCE_PORT: String(port) },
    timeout: 20000,
  });
  const lines = stdout.trim().split("\n");
  assert.equal(lines.length, 4, stdout);
  assert.match(lines[0]!, /^A holds "report" with token (\d+): its write is accepted$/);
  assert.match(lines[1]!, /^B holds "report" with token (\d+): its write is accepted$/);
  assert.match(lines[2]!, /^A wakes up and writes with token \d+: its write is REFUSED$/);
  assert.match(lines[3]!, /^the resource holds B's write, token \d+$/);
});
