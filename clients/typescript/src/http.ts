// http.ts -- the transport: one HTTP request with a whole-call deadline (connect, send and
// receive together, by one local timer), over a keep-alive connection pool; and the
// opening of a duplex hold (Upgrade: redlock-hold), which gets a connection of its own.
// node:http and node:https only (TLS options: a CA, a client certificate).

import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";

import { RedlockError, errorFromAnswer } from "./errors.js";

/** TLS settings for an https:// URL (as node:https takes them). */
export interface TlsOptions {
  /** CA certificates to trust instead of the system's (PEM), e.g. readFileSync("ca.pem"). */
  ca?: string | Buffer | Array<string | Buffer> | undefined;
  /** A client certificate (PEM), with `key`. */
  cert?: string | Buffer | undefined;
  key?: string | Buffer | undefined;
  /** false: accept any certificate (tests only). Default true. */
  rejectUnauthorized?: boolean | undefined;
  /** The name to check the certificate against (default: the URL's host). */
  servername?: string | undefined;
}

/** A JSON answer: its status, headers and parsed body (undefined if it was not JSON). */
export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly json: unknown;
  readonly text: string;
}

/** What a duplex hold's request came to. */
export type Opened =
  /** 101: the connection is the hold's; `head`: the bytes that came with the header. */
  | { readonly kind: "upgraded"; readonly socket: Duplex; readonly head: Buffer }
  /** Any other answer; `body` is the response (a 201 one-way stream, or an error). */
  | { readonly kind: "answer"; readonly status: number; readonly headers: http.IncomingHttpHeaders; readonly body: http.IncomingMessage };

export type Json = { [k: string]: unknown };

export interface CallOptions {
  /** The whole call's limit, in ms: past it the request is abandoned ("timeout"). */
  timeoutMs: number;
  /** The caller's signal: its abort abandons the request and rejects with its reason. */
  signal?: AbortSignal | undefined;
  /** What is being done, for messages ("acquire \"x\""). */
  what: string;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return typeof code === "string" && !e.message.includes(code) ? `${e.message} (${code})` : e.message;
  }
  return String(e);
}

/** The header value as one string. */
export function header(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

/** A non-2xx answer as its RedlockError, the message prefixed with what was being done. */
export function answerError(status: number, headers: http.IncomingHttpHeaders, json: unknown, what: string): RedlockError {
  const e = errorFromAnswer(status, json, (name) => header(headers, name) ?? null);
  e.message = `${what}: ${e.message}`;
  return e;
}

export class Transport {
  readonly url: URL;
  private readonly base: string;
  private readonly mod: typeof http | typeof https;
  private readonly agent: http.Agent;
  private readonly tls: TlsOptions;

  constructor(
    url: string,
    private readonly token: string | undefined,
    tls: TlsOptions | undefined,
  ) {
    this.url = new URL(url);
    if (this.url.protocol !== "http:" && this.url.protocol !== "https:") {
      throw new TypeError(`redlockd URL must be http:// or https://, not ${JSON.stringify(url)}`);
    }
    this.base = this.url.pathname.replace(/\/+$/, "");
    this.tls = tls ?? {};
    this.mod = this.url.protocol === "https:" ? https : http;
    // Idle connections are closed after 4 s (the service closes them after its
    // --header-timeout-ms, 15 s by default): a reused one is seldom one it just closed.
    const agentOptions = { keepAlive: true, timeout: 4000, ...this.tlsOptions() };
    this.agent = this.url.protocol === "https:" ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  }

  private tlsOptions(): Pick<https.RequestOptions, "ca" | "cert" | "key" | "rejectUnauthorized" | "servername"> {
    if (this.url.protocol !== "https:") return {};
    const t = this.tls;
    const o: Pick<https.RequestOptions, "ca" | "cert" | "key" | "rejectUnauthorized" | "servername"> = {};
    if (t.ca !== undefined) o.ca = t.ca;
    if (t.cert !== undefined) o.cert = t.cert;
    if (t.key !== undefined) o.key = t.key;
    if (t.rejectUnauthorized !== undefined) o.rejectUnauthorized = t.rejectUnauthorized;
    if (t.servername !== undefined) o.servername = t.servername;
    return o;
  }

  private headers(body: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: "application/json", ...extra };
    if (this.token !== undefined) h["authorization"] = `Bearer ${this.token}`;
    if (body !== undefined) {
      h["content-type"] = "application/json";
      h["content-length"] = String(Buffer.byteLength(body));
    }
    return h;
  }

  private options(method: string, path: string, headers: Record<string, string>, agent: http.Agent | false): http.RequestOptions {
    return {
      protocol: this.url.protocol,
      hostname: this.url.hostname.replace(/^\[|\]$/g, ""),
      port: this.url.port === "" ? undefined : Number(this.url.port),
      path: this.base + path,
      method,
      headers,
      agent,
      // Every address the name resolves to, as curl does: a standard /etc/hosts maps
      // localhost to ::1 as well as 127.0.0.1, and Node 18 (Debian's) tries only the
      // first unless asked (Node 20 does this by default).
      autoSelectFamily: true,
      ...(agent === false ? this.tlsOptions() : {}),
    } as http.RequestOptions;
  }

  /** Closes the idle connections of the pool. */
  close(): void {
    this.agent.destroy();
  }

  /**
   * One request and its answer, all within `timeoutMs` (one timer: no connect, write or
   * read can stretch it).  Rejects with RedlockError "timeout" or "connection_failed", or
   * with the caller's abort reason; a non-2xx answer resolves (see `json`).
   */
  async request(method: string, path: string, body: Json | undefined, o: CallOptions): Promise<Answer> {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const started = performance.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(method, path, text, o, o.timeoutMs - (performance.now() - started));
      } catch (e) {
        // A pooled connection the service had just closed (its idle limit): the request
        // never reached it; once more on a new connection.
        if (attempt === 0 && e instanceof StaleSocket) continue;
        throw e instanceof StaleSocket ? e.error : e;
      }
    }
  }

  private once(method: string, path: string, text: string | undefined, o: CallOptions, limitMs: number): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const signal = o.signal;
      if (signal?.aborted) return reject(signal.reason);
      let settled = false;
      let answered = false;
      const settle = (err: unknown, v?: Answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err !== undefined) {
          req.destroy();
          reject(err);
        } else resolve(v!);
      };
      const onAbort = () => settle(signal!.reason);
      const timer = setTimeout(
        () => settle(new RedlockError("timeout", `${o.what}: no answer within ${Math.round(limitMs)} ms`)),
        Math.max(0, limitMs),
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      const req = this.mod.request(this.options(method, path, this.headers(text), this.agent), (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          settle(undefined, { status: res.statusCode ?? 0, headers: res.headers, json: parseJson(text), text });
        });
        res.on("error", (e) => settle(new RedlockError("connection_failed", `${o.what}: ${describe(e)}`, { cause: e })));
        res.on("close", () => {
          if (!res.complete) settle(new RedlockError("connection_failed", `${o.what}: the answer was cut off`));
        });
      });
      req.on("error", (e: NodeJS.ErrnoException) => {
        const err = new RedlockError("connection_failed", `${o.what}: ${describe(e)}`, { cause: e });
        if (!answered && req.reusedSocket && (e.code === "ECONNRESET" || e.code === "EPIPE")) settle(new StaleSocket(err));
        else settle(err);
      });
      req.end(text);
    });
  }

  /**
   * Sends a duplex hold's acquire (`hold=stream` with `Connection: Upgrade`, `Upgrade:
   * redlock-hold`) on a connection of its own, and resolves once the answer's header came:
   * the upgraded socket, or the answer.  `timeoutMs` bounds it (the caller keeps counting
   * for the grant line).
   */
  openDuplex(path: string, body: Json, o: CallOptions): Promise<Opened> {
    const text = JSON.stringify(body);
    return new Promise<Opened>((resolve, reject) => {
      const signal = o.signal;
      if (signal?.aborted) return reject(signal.reason);
      let settled = false;
      const settle = (err: unknown, v?: Opened) => {
        if (settled) {
          // Came after the deadline or an abort: nobody takes it, close it.
          if (v?.kind === "upgraded") v.socket.destroy();
          else if (v?.kind === "answer") v.body.destroy();
          return;
        }
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err !== undefined) {
          req.destroy();
          reject(err);
        } else resolve(v!);
      };
      const onAbort = () => settle(signal!.reason);
      const timer = setTimeout(
        () => settle(new RedlockError("timeout", `${o.what}: no answer within ${Math.round(o.timeoutMs)} ms`)),
        Math.max(0, o.timeoutMs),
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      const headers = this.headers(text, { connection: "Upgrade", upgrade: "redlock-hold", accept: "application/json, application/x-ndjson" });
      const req = this.mod.request(this.options("POST", path, headers, false));
      req.on("upgrade", (res: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        if (res.statusCode !== 101 || !/(^|,)\s*redlock-hold\s*(,|$)/i.test(header(res.headers, "upgrade") ?? "")) {
          socket.destroy();
          settle(new RedlockError("bad_response", `${o.what}: upgraded to ${JSON.stringify(header(res.headers, "upgrade"))}, not redlock-hold`));
          return;
        }
        settle(undefined, { kind: "upgraded", socket, head });
      });
      req.on("response", (res: http.IncomingMessage) => settle(undefined, { kind: "answer", status: res.statusCode ?? 0, headers: res.headers, body: res }));
      req.on("error", (e) => settle(new RedlockError("connection_failed", `${o.what}: ${describe(e)}`, { cause: e })));
      req.end(text);
    });
  }
}

/** A request that failed on a pooled connection the service had closed (sent once more). */
class StaleSocket extends Error {
  constructor(readonly error: RedlockError) {
    super(error.message);
  }
}

/** Reads a body to its end as text, within what is left of a deadline. */
export function readBody(body: http.IncomingMessage, limitMs: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      body.destroy();
      reject(new RedlockError("timeout", `${what}: the answer did not come within the time left`));
    }, Math.max(0, limitMs));
    body.on("data", (c: Buffer) => chunks.push(c));
    body.on("end", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString("utf8"));
    });
    body.on("error", (e) => {
      clearTimeout(timer);
      reject(new RedlockError("connection_failed", `${what}: ${describe(e)}`, { cause: e }));
    });
  });
}

export { parseJson };
