// client.ts -- the redlockd HTTP client: acquire, release, extend, status and list, and
// locks held while connected (hold, using); the same for the permits of a semaphore
// (acquirePermit ..., holdSemaphore, usingSemaphore).  Node 18+ global fetch; no dependencies.

import { randomBytes } from "node:crypto";

import { RedlockError, errorFromAnswer } from "./errors.js";
import { ExtensionLines, type HeldLock, type HeldPermit, PermitHold, StreamHold } from "./hold.js";
import {
  type Extension,
  type Grant,
  LineReader,
  type LockList,
  type LockState,
  type PermitGrant,
  type SemaphoreState,
  parseExtension,
  parseGrant,
  parseLockList,
  parseLockState,
  parsePermitGrant,
  parseSemaphoreState,
} from "./wire.js";

export interface ClientOptions {
  /** Bearer token, when the service runs with --auth-tokens-file. */
  token?: string | undefined;
  /**
   * How long a request may take beyond the wait it asks the service for (`waitMs`), in ms;
   * past it the request is abandoned.  Default 10000.
   */
  timeoutMs?: number | undefined;
  /**
   * How many times an acquire (or hold) whose answer never came -- a timeout, or a
   * connection that failed or broke -- is sent again, with the same lease (so a grant whose
   * answer was lost is found again, with its fencing token, instead of being held against
   * you).  Default 2.
   */
  retries?: number | undefined;
  /** A fetch to use instead of the global one. */
  fetch?: typeof globalThis.fetch | undefined;
}

export interface AcquireOptions {
  /** The lock's time-to-live in ms (the service's default: 30000). */
  ttlMs?: number | undefined;
  /** How long to wait for a held lock, in ms (default 0: LockHeldError at once). */
  waitMs?: number | undefined;
  /** Who acquires it (shown by status and list): a host, a pod, a pid. */
  owner?: string | undefined;
  /**
   * The lease to acquire with (16..128 of [A-Za-z0-9_-]).  By default the client draws one
   * (192 random bits) so that its own retries are idempotent; give your own to retry an
   * acquire across processes.
   */
  lease?: string | undefined;
  /** Aborts the acquire (and, for hold/using, releases the lock). */
  signal?: AbortSignal | undefined;
  /**
   * A read hold: any number of shared holders at once, never beside an exclusive one (locks
   * only; `owner` is for exclusive holds).  Release and extend it as any grant.
   */
  shared?: boolean | undefined;
}

export type HoldOptions = AcquireOptions;

/** The options of a semaphore's acquire (acquirePermit, holdSemaphore, usingSemaphore). */
export interface PermitOptions extends Omit<AcquireOptions, "shared"> {
  /** The semaphore's number of permits, 1..1024: every caller of a name must use the same. */
  permits: number;
}

export interface ExtendOptions {
  /** The new time-to-live from now, in ms (the service's default: 30000). */
  ttlMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface StatusOptions {
  /** With `waitMs`: answer as soon as the lock's index is no longer this one (a watch). */
  index?: string | undefined;
  /** How long a watch may wait, in ms. Needs `index`. */
  waitMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface ListOptions {
  /** Only names starting with this (default: all the token may see). */
  prefix?: string | undefined;
  /** At most this many locks, 1..1000 (the service's default: 100). */
  limit?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal | undefined;
}

/** The body of `using`: runs while the lock is held; `signal` aborts if it is lost. */
export type UsingRoutine<T> = (lock: HeldLock, signal: AbortSignal) => Promise<T> | T;

/** The body of `usingSemaphore`: runs while the permit is held; `signal` aborts if it is lost. */
export type UsingPermitRoutine<T> = (permit: HeldPermit, signal: AbortSignal) => Promise<T> | T;

type Json = { [k: string]: string | number | boolean };

/** A fresh lease: 24 random bytes, 32 characters of [A-Za-z0-9_-] (like the service's). */
export function newLease(): string {
  return randomBytes(24).toString("base64url");
}

/**
 * One request's time limit and the caller's signal, as one AbortController (Node 18 has no
 * AbortSignal.any).  The caller's abort wins over a timeout in what is reported.
 */
class Attempt {
  readonly controller = new AbortController();
  private timedOut = false;
  private readonly timer: ReturnType<typeof setTimeout>;
  private readonly detach: () => void;

  constructor(
    private readonly limitMs: number,
    private readonly caller: AbortSignal | undefined,
  ) {
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort();
    }, limitMs);
    if (caller === undefined) {
      this.detach = () => {};
    } else {
      const onAbort = () => this.controller.abort(caller.reason);
      caller.addEventListener("abort", onAbort, { once: true });
      this.detach = () => caller.removeEventListener("abort", onAbort);
      if (caller.aborted) onAbort();
    }
  }

  /** Stops the time limit and forgets the caller's signal; the connection stays as it is. */
  finish(): void {
    clearTimeout(this.timer);
    this.detach();
  }

  /** What to throw for an exception of fetch or of reading the body. */
  failure(e: unknown, what: string): unknown {
    if (this.caller?.aborted) return this.caller.reason;
    if (this.timedOut) return new RedlockError("timeout", `${what}: no answer within ${this.limitMs} ms`, { cause: e });
    if (e instanceof RedlockError) return e;
    const cause = e instanceof Error && e.cause instanceof Error ? `: ${e.cause.message}` : "";
    return new RedlockError("connection_failed", `${what}: ${e instanceof Error ? e.message : String(e)}${cause}`, { cause: e });
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function retriable(e: unknown): boolean {
  return e instanceof RedlockError && (e.code === "timeout" || e.code === "connection_failed");
}

/**
 * A client of one redlockd service (or a load balancer in front of several instances).
 *
 *     const client = new Client("http://127.0.0.1:8080", { token });
 *     await client.using("reports", { ttlMs: 10000 }, async (lock, signal) => { ... });
 */
export class Client {
  readonly url: string;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly fetchImpl: typeof globalThis.fetch;

  constructor(url: string, options: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10000;
    this.retries = options.retries ?? 2;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: Node 18 or later is needed, or pass options.fetch");
    this.fetchImpl = f;
  }

  /**
   * Acquires `name` (POST /locks/{name}).  Resolves to the grant; pass its `fencingToken` to
   * the resource, and release or extend it with its `lease` before `validityMs` runs out.
   * Throws LockHeldError (held, after `waitMs` if given), QuorumUnavailableError,
   * UnauthorizedError, RedlockError (any other code; `timeout` once the retries are spent).
   */
  async acquire(name: string, options: AcquireOptions = {}): Promise<Grant> {
    const lease = options.lease ?? newLease();
    return this.retrying(options, async (waitMs) => {
      const body = acquireBody(options, lease, waitMs);
      return parseGrant(await this.call("POST", lockPath(name), `acquire "${name}"`, body, waitMs ?? 0, options.signal));
    });
  }

  /**
   * Takes one of the `permits` permits of the semaphore `name` (POST /semaphores/{name}): at
   * most that many holders at once.  Resolves to the grant with its `slot`; release or extend
   * it with `releasePermit`/`extendPermit`.  Throws LockHeldError when every permit is taken
   * (after `waitMs`, if given), PermitsMismatchError when the semaphore is in use with another
   * number of permits, and as `acquire` does.
   */
  async acquirePermit(name: string, options: PermitOptions): Promise<PermitGrant> {
    const lease = options.lease ?? newLease();
    return this.retrying(options, async (waitMs) => {
      const body = { ...acquireBody(options, lease, waitMs), permits: options.permits };
      return parsePermitGrant(await this.call("POST", semPath(name), `acquire permit "${name}"`, body, waitMs ?? 0, options.signal));
    });
  }

  /** Gives back the permit of `name` that `lease` holds (DELETE); as `release`. */
  async releasePermit(name: string, lease: string, options: RequestOptions = {}): Promise<void> {
    await this.call("DELETE", semPath(name), `release permit "${name}"`, { lease }, 0, options.signal);
  }

  /** Extends the permit of `name` that `lease` holds (PATCH); as `extend`. */
  async extendPermit(name: string, lease: string, options: ExtendOptions = {}): Promise<Extension> {
    const body: Json = { lease };
    if (options.ttlMs !== undefined) body["ttl_ms"] = options.ttlMs;
    return parseExtension(await this.call("PATCH", semPath(name), `extend permit "${name}"`, body, 0, options.signal));
  }

  /** The semaphore's permits held and free (GET /semaphores/{name}). */
  async semaphoreStatus(name: string, options: RequestOptions = {}): Promise<SemaphoreState> {
    return parseSemaphoreState(await this.call("GET", semPath(name), `semaphore status "${name}"`, undefined, 0, options.signal));
  }

  /**
   * Takes a permit (as `acquirePermit`) and keeps it until `release()`, by extending it every
   * third of its ttl (this service ends a streamed hold of a permit at once, so no stream).
   * The returned permit's `signal` aborts when it is lost, as a HeldLock's does.
   */
  async holdSemaphore(name: string, options: PermitOptions): Promise<HeldPermit> {
    const lease = options.lease ?? newLease();
    const sent = performance.now();
    const grant = await this.acquirePermit(name, { ...options, lease });
    const connection = new AbortController();
    const lines = new ExtensionLines(grant.ttlMs, sent, (signal) => this.extendPermit(name, grant.lease, { ttlMs: grant.ttlMs, signal }), connection.signal);
    return new PermitHold(grant, sent, lines, connection, () => this.releasePermit(name, grant.lease), options.signal);
  }

  /**
   * Holds a permit of `name` (as `holdSemaphore` does) while `routine(permit, signal)` runs,
   * then releases it; as `using`.
   */
  async usingSemaphore<T>(name: string, options: PermitOptions, routine: UsingPermitRoutine<T>): Promise<T> {
    if (typeof routine !== "function") throw new TypeError("usingSemaphore(name, options, routine): routine must be a function");
    const permit = await this.holdSemaphore(name, options);
    try {
      return await routine(permit, permit.signal);
    } finally {
      await permit.release();
    }
  }

  /** Releases `lease` of `name` (DELETE).  Throws LeaseLostError if it is no longer held. */
  async release(name: string, lease: string, options: RequestOptions = {}): Promise<void> {
    await this.call("DELETE", lockPath(name), `release "${name}"`, { lease }, 0, options.signal);
  }

  /**
   * Extends `lease` of `name` to `ttlMs` from now (PATCH).  The fencing token does not
   * change.  Throws LeaseLostError if it is no longer held, QuorumUnavailableError.
   */
  async extend(name: string, lease: string, options: ExtendOptions = {}): Promise<Extension> {
    const body: Json = { lease };
    if (options.ttlMs !== undefined) body["ttl_ms"] = options.ttlMs;
    return parseExtension(await this.call("PATCH", lockPath(name), `extend "${name}"`, body, 0, options.signal));
  }

  /**
   * The state of `name` (GET): held or not, owner, validity, latest fencing token and index.
   * With `index` and `waitMs` it waits until the index changes (or `waitMs` passes).
   */
  async status(name: string, options: StatusOptions = {}): Promise<LockState> {
    const q = new URLSearchParams();
    if (options.index !== undefined) q.set("index", options.index);
    if (options.waitMs !== undefined) q.set("wait_ms", String(options.waitMs));
    const qs = q.toString();
    const path = lockPath(name) + (qs === "" ? "" : `?${qs}`);
    return parseLockState(await this.call("GET", path, `status "${name}"`, undefined, options.waitMs ?? 0, options.signal));
  }

  /** The locks a quorum holds under `prefix` (GET /locks). */
  async list(options: ListOptions = {}): Promise<LockList> {
    const q = new URLSearchParams();
    if (options.prefix !== undefined) q.set("prefix", options.prefix);
    if (options.limit !== undefined) q.set("limit", String(options.limit));
    const qs = q.toString();
    const path = "/locks" + (qs === "" ? "" : `?${qs}`);
    return parseLockList(await this.call("GET", path, "list", undefined, 0, options.signal));
  }

  /**
   * Acquires `name` and holds it while connected (POST ... hold=stream): the service extends
   * the lease about every third of its ttl for as long as the connection is open.  The
   * returned lock's `signal` aborts when it is lost; call `release()` when done (closing
   * the connection, or this process dying, also releases it).  Throws as `acquire` does.
   */
  async hold(name: string, options: HoldOptions = {}): Promise<HeldLock> {
    const lease = options.lease ?? newLease();
    return this.retrying(options, (waitMs) => this.holdOnce(name, options, lease, waitMs));
  }

  /**
   * Holds `name` (as `hold` does) while `routine(lock, signal)` runs, then releases it, and
   * resolves to what the routine returned (or rejects with what it threw).  `signal` aborts
   * if the lock is lost meanwhile: stop touching the resource then.  The routine's result is
   * returned even if the lock was lost; check `signal.aborted` if that matters.
   */
  using<T>(name: string, routine: UsingRoutine<T>): Promise<T>;
  using<T>(name: string, options: HoldOptions, routine: UsingRoutine<T>): Promise<T>;
  async using<T>(name: string, a: HoldOptions | UsingRoutine<T>, b?: UsingRoutine<T>): Promise<T> {
    const [options, routine] = typeof a === "function" ? [{}, a] : [a, b];
    if (typeof routine !== "function") throw new TypeError("using(name, [options,] routine): routine must be a function");
    const lock = await this.hold(name, options);
    try {
      return await routine(lock, lock.signal);
    } finally {
      await lock.release();
    }
  }

  private async holdOnce(name: string, options: HoldOptions, lease: string, waitMs: number | undefined): Promise<HeldLock> {
    const what = `hold "${name}"`;
    const body = { ...acquireBody(options, lease, waitMs), hold: "stream" };
    const attempt = new Attempt(this.timeoutMs + (waitMs ?? 0), options.signal);
    let granted: { grant: unknown; receivedAt: number; reader: LineReader } | undefined;
    try {
      let res: Response;
      try {
        res = await this.fetchImpl(this.url + lockPath(name), this.init("POST", body, attempt.controller.signal));
      } catch (e) {
        throw attempt.failure(e, what);
      }
      if (!res.ok || res.body === null) {
        let text: string;
        try {
          text = await res.text();
        } catch (e) {
          throw attempt.failure(e, what);
        }
        if (!res.ok) throw withContext(errorFromAnswer(res.status, parseJson(text), res.headers), what);
        throw new RedlockError("bad_response", `${what}: HTTP ${res.status} without a body`, { status: res.status });
      }
      const type = res.headers.get("content-type") ?? "";
      if (!type.startsWith("application/x-ndjson")) {
        throw new RedlockError("bad_response", `${what}: expected a stream (application/x-ndjson), got "${type}"`, {
          status: res.status,
          requestId: res.headers.get("x-request-id"),
        });
      }
      const reader = new LineReader(res.body);
      let line: string | null;
      try {
        line = await reader.next();
      } catch (e) {
        throw attempt.failure(e, what);
      }
      const receivedAt = performance.now();
      if (line === null) throw new RedlockError("connection_failed", `${what}: the stream ended before the grant`);
      granted = { grant: parseJson(line), receivedAt, reader };
    } finally {
      attempt.finish();
      // Anything but a grant: close the connection (a grant nobody will hold is released).
      if (granted === undefined) attempt.controller.abort();
    }
    let grant: Grant;
    try {
      grant = parseGrant(granted.grant);
    } catch (e) {
      attempt.controller.abort();
      throw e;
    }
    const del = () => this.release(grant.name, grant.lease);
    return new StreamHold(grant, granted.receivedAt, granted.reader, attempt.controller, del, options.signal);
  }

  /** Runs `attempt` again, with the same lease, while its answer never came (see `retries`). */
  private async retrying<T>(options: AcquireOptions, attempt: (waitMs: number | undefined) => Promise<T>): Promise<T> {
    const start = performance.now();
    for (let i = 0; ; i++) {
      // Each attempt waits only for what is left of the caller's wait.
      const waitMs =
        options.waitMs === undefined ? undefined : Math.max(0, Math.round(options.waitMs - (performance.now() - start)));
      try {
        return await attempt(waitMs);
      } catch (e) {
        if (!retriable(e) || i >= this.retries) throw e;
      }
      await sleep(Math.min(100 * 2 ** i, 1000), options.signal);
    }
  }

  private init(method: string, body: Json | undefined, signal: AbortSignal): RequestInit {
    const headers: Record<string, string> = { accept: "application/json, application/x-ndjson" };
    if (this.token !== undefined) headers["authorization"] = `Bearer ${this.token}`;
    const init: RequestInit = { method, headers, signal };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return init;
  }

  /** One request and its JSON answer; a non-2xx answer throws its RedlockError. */
  private async call(
    method: string,
    path: string,
    what: string,
    body: Json | undefined,
    waitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    const attempt = new Attempt(this.timeoutMs + waitMs, signal);
    let res: Response;
    let text: string;
    try {
      res = await this.fetchImpl(this.url + path, this.init(method, body, attempt.controller.signal));
      text = await res.text();
    } catch (e) {
      throw attempt.failure(e, what);
    } finally {
      attempt.finish();
    }
    const json = parseJson(text);
    if (!res.ok) throw withContext(errorFromAnswer(res.status, json, res.headers), what);
    if (json === undefined) {
      throw new RedlockError("bad_response", `${what}: HTTP ${res.status} with a body that is not JSON`, {
        status: res.status,
        requestId: res.headers.get("x-request-id"),
      });
    }
    return json;
  }
}

function lockPath(name: string): string {
  return `/locks/${encodeURIComponent(name)}`;
}

function semPath(name: string): string {
  return `/semaphores/${encodeURIComponent(name)}`;
}

function acquireBody(options: AcquireOptions, lease: string, waitMs: number | undefined): Json {
  const body: Json = { lease };
  if (options.ttlMs !== undefined) body["ttl_ms"] = options.ttlMs;
  if (waitMs !== undefined && waitMs > 0) body["wait_ms"] = waitMs;
  if (options.owner !== undefined) body["owner"] = options.owner;
  if (options.shared === true) body["mode"] = "shared";
  return body;
}

/** The service's message, prefixed with what was being done. */
function withContext(e: RedlockError, what: string): RedlockError {
  e.message = `${what}: ${e.message}`;
  return e;
}
