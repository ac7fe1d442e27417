// tls.test.ts -- the client over HTTPS: a third redlockd instance on the stack's masters,
// started here with a certificate made here (openssl); a client given its CA (tls.ca)
// keeps a lock over TLS by a duplex stream and by extensions, and a client without the CA
// is refused by the certificate check.

import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, RedlockError } from "@redlockd/client";

import { MASTER_PORTS, uniqueName, waitFor } from "./helpers.js";

let dir = "";
let service: ChildProcess | undefined;
let url = "";
let ca: Buffer;

function redlockd(): string {
  const candidates = [process.env["REDLOCKD_BIN"], fileURLToPath(new URL("../../../../bin/redlockd", import.meta.url))];
  const bin = candidates.find((p) => p !== undefined && p !== "" && existsSync(p));
  if (bin === undefined) throw new Error("no bin/redlockd (set REDLOCKD_BIN)");
  return bin;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "redlock-ts-tls."));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=redlockd test",
    "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1", "-keyout", key, "-out", cert], { stdio: "ignore" });
  ca = readFileSync(cert);
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  service = spawn(redlockd(), ["--listen", `127.0.0.1:${port}`, "--masters", MASTER_PORTS.map((p) => `127.0.0.1:${p}`).join(","),
    "--node-timeout-ms", "250", "--tls-cert", cert, "--tls-key", key], { stdio: "ignore" });
  url = `https://127.0.0.1:${port}`;
  const probe = new Client(url, { tls: { ca }, timeoutMs: 2000 });
  await waitFor("the TLS instance to be ready", async () => (await probe.ready().catch(() => undefined))?.ready === true, 20000);
  probe.close();
});

after(() => {
  service?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

for (const keepalive of ["stream", "extend"] as const) {
  test(`over TLS with its CA: a lock kept by ${keepalive} past its ttl, then released`, async () => {
    const c = new Client(url, { tls: { ca }, retryCount: 0 });
    const name = uniqueName(`tls-${keepalive}`);
    const lock = await c.hold(name, { ttlMs: 2000, keepalive });
    assert.equal(lock.keepalive, keepalive);
    const t0 = performance.now();
    await waitFor("more than a ttl", () => performance.now() - t0 > 2500);
    assert.equal(lock.held, true);
    assert.ok(lock.extensions >= 3, `${lock.extensions} renewals`);
    assert.equal(await lock.release(), true);
    assert.equal((await c.status(name)).held, false);
    c.close();
  });
}

test("over TLS without its CA: refused by the certificate check", async () => {
  const c = new Client(url, { retryCount: 0, timeoutMs: 3000 });
  const e = await c.status(uniqueName("tls-no-ca")).catch((e: unknown) => e);
  assert.ok(e instanceof RedlockError && e.code === "connection_failed", String(e));
  assert.match(e.message, /certificate/i);
  c.close();
});
