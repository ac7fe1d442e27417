// helpers.ts -- what the tests share: the stack's environment (clients/stack.py), waits on a
// condition with a deadline, the service's metrics, freezing masters, and a TCP relay that
// can swallow an answer (a real lost answer, on a real connection).

import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Client, type ClientOptions } from "@redlockd/client";

function env(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new Error(`${name} is not set: run the tests with python3 clients/stack.py -- clients/typescript/test.sh`);
  }
  return v;
}

export const URL_ = env("REDLOCK_URL");
export const TOKEN = env("REDLOCK_TEST_TOKEN");
export const MASTER_PIDS = env("REDLOCK_TEST_MASTER_PIDS").split(",").map(Number);
export const MASTER_PORTS = env("REDLOCK_TEST_MASTER_PORTS").split(",").map(Number);
/** A second instance on the same masters. */
export const URL_B = env("REDLOCK_URL_B");
/** The two instances' PIDs: [A (behind the relay), B]. */
export const SERVICE_PIDS = env("REDLOCK_TEST_SERVICE_PIDS").split(",").map(Number);
/** clients/stack.py's fault relay in front of instance A, and its control port. */
export const RELAY_URL = env("REDLOCK_TEST_RELAY_URL");
export const RELAY_CONTROL = env("REDLOCK_TEST_RELAY_CONTROL");
/** redlockd's default --key-prefix (the lock keys on the masters). */
export const KEY_PREFIX = "redlock:";

/** A client of the stack's first instance; no retries unless asked (tests expect the first answer). */
export function client(options: ClientOptions = {}): Client {
  return new Client(URL_, { token: TOKEN, retryCount: 0, ...options });
}

let seq = 0;
/** A lock name no other test uses (tests share one service). */
export function uniqueName(what: string): string {
  return `ts-test/${what}-${process.pid}-${++seq}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `cond` until it returns a value other than undefined/false; throws at the deadline. */
export async function waitFor<T>(what: string, cond: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** One value of the service's /metrics (no labels), e.g. redlockd_parked_waiters. */
export async function metric(name: string): Promise<number> {
  const res = await fetch(`${URL_}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const text = await res.text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (m === null) throw new Error(`no metric ${name} in /metrics`);
  return Number(m[1]);
}

/** Whether the service says a quorum of masters answers. */
export async function ready(): Promise<boolean> {
  const res = await fetch(`${URL_}/readyz`, { headers: { authorization: `Bearer ${TOKEN}` } });
  await res.text();
  return res.status === 200;
}

/**
 * Runs `body` with the first `n` masters stopped (SIGSTOP); continues them (SIGCONT) after,
 * also when `body` throws, and waits until the service is ready again.
 */
export async function withFrozenMasters<T>(n: number, body: () => Promise<T>): Promise<T> {
  const pids = MASTER_PIDS.slice(0, n);
  try {
    for (const pid of pids) process.kill(pid, "SIGSTOP");
    return await body();
  } finally {
    for (const pid of pids) process.kill(pid, "SIGCONT");
    await waitFor("the service to be ready after the masters were continued", ready, 20000);
  }
}

/** api/openapi.yaml of the repository this package sits in. */
export function openapiText(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const p = join(dir, "api", "openapi.yaml");
    if (existsSync(p)) return readFileSync(p, "utf8");
    const up = dirname(dir);
    if (up === dir) throw new Error("api/openapi.yaml not found above " + fileURLToPath(import.meta.url));
    dir = up;
  }
}

/**
 * A TCP relay in front of the service.  The first `swallow` connections reach the service,
 * but what it answers on them is kept here (in `swallowed`) and never sent on: the client
 * sees no answer.  Later connections are relayed both ways.
 */
export class Relay {
  readonly swallowed: string[] = [];
  connections = 0;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private swallow: number,
    private readonly oneWay: boolean,
  ) {
    const target = new URL(URL_);
    this.server = net.createServer((down) => {
      this.connections++;
      const swallowThis = this.swallow > 0;
      if (swallowThis) this.swallow--;
      const index = this.swallowed.length;
      if (swallowThis) this.swallowed.push("");
      const up = net.connect(Number(target.port), target.hostname);
      for (const s of [down, up]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => {});
      }
      if (this.oneWay) {
        // An older service: the request's Upgrade is dropped, so the answer is a one-way stream.
        down.on("data", (d: Buffer) =>
          up.write(d.toString("latin1").replace(/\r\nconnection: upgrade\r\n/i, "\r\nconnection: keep-alive\r\n").replace(/\r\nupgrade: redlock-hold(?=\r\n)/i, ""), "latin1"),
        );
      } else down.pipe(up);
      if (swallowThis) up.on("data", (d: Buffer) => (this.swallowed[index] += d.toString("latin1")));
      else up.pipe(down);
      down.on("close", () => up.destroy());
      up.on("close", () => down.destroy());
    });
  }

  /** `swallow`: how many first answers to keep; `oneWay`: drop the requests' Upgrade (an older service). */
  static async start(swallow: number, oneWay = false): Promise<Relay> {
    const r = new Relay(swallow, oneWay);
    await new Promise<void>((resolve) => r.server.listen(0, "127.0.0.1", resolve));
    return r;
  }

  get url(): string {
    const a = this.server.address() as net.AddressInfo;
    return `http://127.0.0.1:${a.port}`;
  }

  /** The JSON body of the i-th swallowed answer (it must be complete). */
  swallowedBody(i: number): unknown {
    const raw = this.swallowed[i] ?? "";
    const at = raw.indexOf("\r\n\r\n");
    if (at < 0) throw new Error(`swallowed answer ${i} is incomplete: ${JSON.stringify(raw)}`);
    return JSON.parse(raw.slice(at + 4));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Sends one command to the stack's relay ("delay down 800", "trickle down 50", "cut", "reset"). */
export async function relay(command: string): Promise<void> {
  const [host, port] = RELAY_CONTROL.split(":");
  const sock = net.connect(Number(port), host!);
  sock.setEncoding("utf8");
  let answer = "";
  await new Promise<void>((resolve, reject) => {
    sock.on("error", reject);
    sock.on("data", (d: string) => {
      answer += d;
      if (answer.includes("\n")) resolve();
    });
    sock.write(command + "\n");
  });
  sock.destroy();
  if (answer.trim() !== "ok") throw new Error(`relay ${command}: ${answer.trim()}`);
}

/** One Redis command by RESP on 127.0.0.1:port; resolves to its raw reply line(s). */
export function redisCommand(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let data = "";
    sock.setEncoding("utf8");
    sock.on("error", reject);
    sock.on("data", (d: string) => {
      data += d;
      if (data.endsWith("\r\n")) {
        sock.destroy();
        resolve(data);
      }
    });
    sock.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(""));
  });
}

/**
 * With nobody extending `key` any more: a moment (performance.now()) before which it cannot
 * have expired on a quorum of masters, so before which nobody else can be granted it.
 */
export async function quorumExpiry(key: string): Promise<number> {
  const ends: number[] = [];
  for (const port of MASTER_PORTS) {
    const t = performance.now();
    const ms = Number((await redisCommand(port, "PTTL", key)).slice(1).trim());
    ends.push(ms === -2 ? -Infinity : ms < 0 ? Infinity : t + ms);
  }
  ends.sort((a, b) => a - b);
  return ends[Math.floor(MASTER_PORTS.length / 2)]!;
}

/**
 * Another client: asks `url` for NAME (a lock, or a permit of a semaphore of one) every
 * 20 ms until granted, with global fetch (nothing of this client).  Resolves to when the
 * granted request was sent (performance.now(), a moment before the grant's round) and the
 * grant; releases nothing.
 */
export async function grantElsewhere(url: string, name: string, options: { sem?: boolean; ttlMs?: number; withinMs?: number } = {}): Promise<{ sent: number; lease: string }> {
  const coll = options.sem === true ? "semaphores" : "locks";
  const body: Record<string, unknown> = { ttl_ms: options.ttlMs ?? 3000 };
  if (options.sem === true) body["permits"] = 1;
  const end = performance.now() + (options.withinMs ?? 20000);
  while (performance.now() < end) {
    const sent = performance.now();
    try {
      const res = await fetch(`${url}/${coll}/${encodeURIComponent(name)}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
      const j = (await res.json()) as { lease?: string; error?: string };
      if (res.status === 201) return { sent, lease: j.lease! };
      if (res.status !== 409 && res.status !== 503) throw new Error(`acquire at ${url}: HTTP ${res.status} ${JSON.stringify(j)}`);
    } catch (e) {
      if (e instanceof Error && e.message.startsWith("acquire at")) throw e;
    }
    await sleep(20);
  }
  throw new Error(`${name} was never granted at ${url}`);
}

/** Releases a lease taken by grantElsewhere (errors ignored). */
export async function releaseElsewhere(url: string, name: string, lease: string, sem = false): Promise<void> {
  await fetch(`${url}/${sem ? "semaphores" : "locks"}/${encodeURIComponent(name)}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ lease }),
    signal: AbortSignal.timeout(5000),
  }).then(
    (r) => r.text(),
    () => "",
  );
}
