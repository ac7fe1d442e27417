// server.js -- the peer that `make bench-peers` measures redlockd against:
// node-redlock 5 (ioredis) behind Node's http module, speaking the same
// POST/DELETE /locks/<name> contract as redlockd (spec: 201 + lease, 409
// lock_held, 200 on release, 404 lease_not_found, 503 quorum_unavailable).
//
//   node server.js --masters 127.0.0.1:7001,... --listen 127.0.0.1:9000 [--workers 2]
//
// --workers N > 1 runs Node's cluster module: N processes share the port.
// It is a benchmark peer, not a product: no PATCH/GET, no fencing tokens
// (node-redlock has none), and wait_ms is node-redlock's own retry loop
// (retryDelay PEER_RETRY_DELAY_MS, default 20 ms, +/- half of it as jitter),
// which is how node-redlock users wait for a lock.
"use strict";

const cluster = require("node:cluster");
const http = require("node:http");
const Redis = require("ioredis");
const { default: Redlock, ResourceLockedError, ExecutionError } = require("redlock");

function parseArgs(argv) {
  const o = {
    masters: process.env.REDLOCK_MASTERS ||
      "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005",
    listen: process.env.REDLOCK_LISTEN || "127.0.0.1:9000",
    workers: 1,
    keyPrefix: "redlock:",
    defaultTtl: 30000,
    maxTtl: 3600000,
    maxWait: 60000,
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    switch (a) {
      case "--masters": o.masters = v; i++; break;
      case "--listen": o.listen = v; i++; break;
      case "--workers": o.workers = parseInt(v, 10); i++; break;
      case "--key-prefix": o.keyPrefix = v; i++; break;
      default:
        process.stderr.write(`server.js: unknown argument '${a}'\n`);
        process.exit(2);
    }
  }
  if (!(o.workers >= 1 && o.workers <= 64)) {
    process.stderr.write(`server.js: bad --workers '${o.workers}'\n`);
    process.exit(2);
  }
  const m = /^([0-9.]+|localhost):(\d+)$/.exec(o.listen);
  if (!m) {
    process.stderr.write(`server.js: bad --listen '${o.listen}'\n`);
    process.exit(2);
  }
  o.host = m[1];
  o.port = parseInt(m[2], 10);
  return o;
}

const opts = parseArgs(process.argv);
const retryDelay = parseInt(process.env.PEER_RETRY_DELAY_MS || "20", 10);
const NAME_RE = /^[A-Za-z0-9._:/-]{1,255}$/;
const LEASE_RE = /^[A-Za-z0-9_-]{16,128}$/;

function send(res, status, obj, extraHeaders) {
  const body = JSON.stringify(obj);
  const h = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) };
  if (extraHeaders) Object.assign(h, extraHeaders);
  res.writeHead(status, h);
  res.end(body);
}

function error(res, status, code, message, extra, headers) {
  send(res, status, Object.assign({ error: code, message }, extra || {}), headers);
}

// True when every vote against came from a key held under another value:
// the lock is held (acquire) or the lease is not there (release).  An
// ExecutionError carries its attempts' stats as promises that settle once
// every master has voted; a master that never answers makes it a 503.
async function lockedOnly(err) {
  if (err instanceof ResourceLockedError) return true;
  if (!(err instanceof ExecutionError) || !err.attempts || err.attempts.length === 0) return false;
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(resolve, 500, null); });
  const stats = await Promise.race([err.attempts[err.attempts.length - 1], late]);
  clearTimeout(timer);
  if (!stats || !(stats.votesAgainst instanceof Map) || stats.votesAgainst.size === 0) return false;
  for (const e of stats.votesAgainst.values()) {
    if (!(e instanceof ResourceLockedError)) return false;
  }
  return true;
}

async function readBody(req) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > 8192) throw Object.assign(new Error("body too large"), { tooLarge: true });
    chunks.push(c);
  }
  if (n === 0) return {};
  const v = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
  return v;
}

function intParam(q, body, key, dflt, lo, hi) {
  let v = q.get(key);
  if (v === null || v === undefined) v = body[key];
  if (v === null || v === undefined) return dflt;
  const n = typeof v === "number" ? v : Number(v);
  if (!Number.isInteger(n) || n < lo || n > hi) return NaN;
  return n;
}

function startWorker() {
  const clients = opts.masters.split(",").map((hp) => {
    const [host, port] = hp.split(":");
    return new Redis({ host, port: parseInt(port, 10), enableAutoPipelining: false,
                       maxRetriesPerRequest: 1, lazyConnect: false });
  });
  const redlock = new Redlock(clients, { driftFactor: 0.01, retryCount: 0, retryDelay,
                                         retryJitter: Math.floor(retryDelay / 2) });
  // Redlock emits an 'error' per refused vote; without a listener the
  // EventEmitter would throw.
  redlock.on("error", () => {});

  async function handle(req, res) {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/healthz" || url.pathname === "/readyz") {
      return send(res, 200, { ready: true });
    }
    if (!url.pathname.startsWith("/locks/")) return error(res, 404, "not_found", "no such route");
    let name;
    try {
      name = decodeURIComponent(url.pathname.slice(7));
    } catch (e) {
      return error(res, 400, "invalid_name", "bad percent-encoding");
    }
    if (!NAME_RE.test(name)) return error(res, 400, "invalid_name", "bad lock name");
    if (req.method !== "POST" && req.method !== "DELETE") {
      return error(res, 405, "method_not_allowed", "POST or DELETE", null, { Allow: "POST, DELETE" });
    }
    let body;
    try {
      body = await readBody(req);
    } catch (e) {
      if (e.tooLarge) return error(res, 413, "body_too_large", "body too large");
      return error(res, 400, "invalid_json", "body is not a JSON object");
    }
    const key = opts.keyPrefix + name;
    if (req.method === "POST") {
      const ttl = intParam(url.searchParams, body, "ttl_ms", opts.defaultTtl, 1, opts.maxTtl);
      if (Number.isNaN(ttl)) return error(res, 400, "invalid_ttl", "ttl_ms out of range");
      const wait = intParam(url.searchParams, body, "wait_ms", 0, 0, opts.maxWait);
      if (Number.isNaN(wait)) return error(res, 400, "invalid_wait", "wait_ms out of range");
      const retryCount = wait > 0 ? Math.ceil(wait / Math.max(1, retryDelay)) : 0;
      const t0 = Date.now();
      try {
        const lock = await redlock.acquire([key], ttl, { retryCount });
        return send(res, 201, { name, lease: lock.value, validity_ms: Math.max(0, lock.expiration - Date.now()),
                                ttl_ms: ttl });
      } catch (e) {
        if (await lockedOnly(e)) {
          return error(res, 409, "lock_held", "lock is held", { retry_after_ms: 100 }, { "Retry-After": "1" });
        }
        return error(res, 503, "quorum_unavailable", String(e && e.message),
                     { nodes_ok: 0, quorum: Math.floor(clients.length / 2) + 1, elapsed_ms: Date.now() - t0 });
      }
    }
    let lease = url.searchParams.get("lease");
    if (lease === null) lease = body.lease;
    if (typeof lease !== "string" || !LEASE_RE.test(lease)) {
      return error(res, 400, "invalid_lease", "lease missing or malformed");
    }
    try {
      await redlock.release({ resources: [key], value: lease, expiration: 0 }, { retryCount: 0 });
      return send(res, 200, { name, released: true });
    } catch (e) {
      if (await lockedOnly(e)) return error(res, 404, "lease_not_found", "no lock with that lease");
      return error(res, 503, "quorum_unavailable", String(e && e.message));
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (!res.headersSent) error(res, 500, "internal", String(e && e.message));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60000;
  server.listen(opts.port, opts.host, () => {
    process.stderr.write(`peer ${process.pid}: listening on ${opts.host}:${opts.port}\n`);
  });
  const stop = () => {
    server.close();
    for (const c of clients) c.disconnect();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (opts.workers > 1 && cluster.isPrimary) {
  const kids = [];
  for (let i = 0; i < opts.workers; i++) kids.push(cluster.fork());
  let stopping = false;
  cluster.on("exit", (w, code) => {
    if (!stopping) {
      process.stderr.write(`peer worker ${w.process.pid} exited (${code})\n`);
      stopping = true;
      for (const k of kids) k.kill();
      process.exit(1);
    }
  });
  const stop = () => {
    stopping = true;
    for (const k of kids) k.kill();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
} else {
  startWorker();
}
