// client.ts -- the redlockd client: every operation of api/openapi.yaml.  Locks (exclusive,
// shared, reentrant), semaphores, sets of names, each as a plain grant (acquire ...) or kept
// while you work (hold, using: a duplex stream, or extensions); watches, listing, force,
// health; and elections (election.ts).  node:http(s) only, no dependencies.

import { randomBytes } from "node:crypto";

import { Election, type ElectionOptions } from "./election.js";
import { RedlockError } from "./errors.js";
import { DuplexKeeper, ExtendKeeper, type Keeper, LineSplitter, OneWayKeeper } from "./hold.js";
import { type Answer, type CallOptions, type Json, type TlsOptions, Transport, answerError, header, parseJson, readBody } from "./http.js";
import {
  type GrantOps,
  type HeldLock,
  type HeldLockSet,
  type HeldPermit,
  KeptLock,
  KeptPermit,
  KeptSet,
  Lock,
  LockSet,
  Permit,
} from "./locks.js";
import {
  type Extension,
  type Grant,
  type Health,
  type LockList,
  type LockState,
  type MultiGrant,
  type MultiReleased,
  type PermitGrant,
  type Released,
  type SemaphoreState,
  parseDuplexGrant,
  parseExtension,
  parseGrant,
  parseHealth,
  parseLockList,
  parseLockState,
  parseMultiGrant,
  parseMultiReleased,
  parsePermitGrant,
  parseReleased,
  parseSemaphoreState,
} from "./wire.js";

/** The URL used when none is given and REDLOCK_URL is not set (`make run`'s). */
export const DEFAULT_URL = "http://127.0.0.1:8080";

/**
 * How an acquire is tried again (node-redlock's settings): up to `retryCount` more times,
 * `retryDelay` ± `retryJitter` ms apart (a random amount in that range), with the same
 * lease.  Per client (ClientOptions), or per call.
 */
export interface RetrySettings {
  /** How many more tries after the first (default 10; 0: none; -1: no limit, until the signal aborts). */
  retryCount?: number | undefined;
  /** The pause between tries, in ms (default 200). */
  retryDelay?: number | undefined;
  /** The most the pause is randomly lengthened or shortened by, in ms (default 200). */
  retryJitter?: number | undefined;
}

export interface ClientOptions extends RetrySettings {
  /** The service's URL, if not given as the first argument (default: REDLOCK_URL, else http://127.0.0.1:8080). */
  url?: string | undefined;
  /** Bearer token, when the service runs with --auth-tokens-file (default: REDLOCK_TOKEN). */
  token?: string | undefined;
  /**
   * Every call's whole limit in ms -- connecting, sending and receiving together -- beyond
   * the wait it asks the service for (`waitMs`).  Default 10000.  A call that keeps a lock
   * (an extension) is bounded by the lock's own deadline as well.
   */
  timeoutMs?: number | undefined;
  /** For an https:// URL: a CA to trust (PEM), a client certificate. */
  tls?: TlsOptions | undefined;
}

export interface RequestOptions {
  /** Aborts the call (it rejects with the signal's reason). */
  signal?: AbortSignal | undefined;
}

export interface AcquireOptions extends RetrySettings, RequestOptions {
  /** The lock's time-to-live in ms (the service's default: 30000). */
  ttlMs?: number | undefined;
  /**
   * How long the service may wait for a held lock, in ms (default 0: LockHeldError at once,
   * then the retry settings apply).  With a wait, a 409 after it is final.
   */
  waitMs?: number | undefined;
  /** Who acquires it (shown by status, list and an election's leader): a host, a pod, a pid. */
  owner?: string | undefined;
  /**
   * The lease to acquire with (16..128 of [A-Za-z0-9_-]).  By default the client draws one
   * (192 random bits), so that its own retries are idempotent; give yours to retry an
   * acquire across processes, or (with `reentrant`) to take the lock again.
   */
  lease?: string | undefined;
  /** A read hold: any number of shared holders at once, never beside an exclusive one. */
  shared?: boolean | undefined;
  /** With the `lease` of the current exclusive holder: one more hold (each release takes one back). */
  reentrant?: boolean | undefined;
}

export interface HoldOptions extends Omit<AcquireOptions, "reentrant"> {
  /**
   * How the lock is kept: "stream" (default: a duplex stream, the service extends it and
   * answers this client's pings) or "extend" (this client sends a PATCH every third of the
   * ttl; no open connection).
   */
  keepalive?: "stream" | "extend" | undefined;
}

/** The options of a semaphore's acquire. */
export interface PermitOptions extends Omit<AcquireOptions, "shared" | "reentrant"> {
  /** The semaphore's number of permits, 1..1024: every caller of a name must use the same. */
  permits: number;
}

export interface PermitHoldOptions extends PermitOptions {
  /** As HoldOptions.keepalive. */
  keepalive?: "stream" | "extend" | undefined;
}

/** The options of a set's acquire (acquireMany, holdMany, usingMany). */
export interface SetOptions extends RetrySettings, RequestOptions {
  ttlMs?: number | undefined;
  waitMs?: number | undefined;
  lease?: string | undefined;
  /** Names of the set held shared (the others exclusive). */
  modes?: { readonly [name: string]: "shared" | "exclusive" } | undefined;
}

export interface ExtendOptions extends RequestOptions {
  /** The new time-to-live from now, in ms (the service's default: 30000). */
  ttlMs?: number | undefined;
}

export interface StatusOptions extends RequestOptions {
  /** With `waitMs`: answer as soon as the lock's index is no longer this one (a watch). */
  index?: string | undefined;
  /** How long a watch may wait, in ms. Needs `index`. */
  waitMs?: number | undefined;
  /** The holder's lease: the answer then says its reentrant hold count (`holds`). */
  lease?: string | undefined;
}

export interface WatchOptions extends RequestOptions {
  /** How long each watching request may wait, in ms (default 30000; the service's cap is its --max-wait-ms). */
  waitMs?: number | undefined;
}

export interface ListOptions extends RequestOptions {
  /** Only names starting with this (default: all the token may see). */
  prefix?: string | undefined;
  /** At most this many locks, 1..1000 (the service's default: 100). */
  limit?: number | undefined;
}

/** The body of `using`: runs while the lock is held; `signal` aborts if it is lost. */
export type UsingRoutine<T> = (lock: HeldLock, signal: AbortSignal) => Promise<T> | T;
/** The body of `usingSemaphore`. */
export type UsingPermitRoutine<T> = (permit: HeldPermit, signal: AbortSignal) => Promise<T> | T;
/** The body of `usingMany`. */
export type UsingSetRoutine<T> = (set: HeldLockSet, signal: AbortSignal) => Promise<T> | T;

/** A fresh lease: 24 random bytes, 32 characters of [A-Za-z0-9_-] (like the service's). */
export function newLease(): string {
  return randomBytes(24).toString("base64url");
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
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const RETRIED = new Set([
  "timeout",
  "connection_failed",
  "lock_contended",
  "quorum_unavailable",
  "masters_quarantined",
  "validity_exhausted",
  "too_many_waiters",
  "too_many_streams",
  "shutting_down",
]);

/** Whether an acquire that failed with `e` may pass if tried again. */
function retriable(e: unknown, waited: boolean): boolean {
  if (!(e instanceof RedlockError)) return false;
  if (e.code === "lock_held") return !waited; // the service already waited
  return RETRIED.has(e.code);
}

/**
 * A streamed hold with a lease you gave is not tried again after an answer that never
 * came: the service lets that try's stream go by its lease, which a later try would share.
 */
function streamWithYourLease(o: { keepalive?: "stream" | "extend" | undefined; lease?: string | undefined }): boolean {
  return o.keepalive !== "extend" && o.lease !== undefined;
}

function lockPath(name: string): string {
  return `/locks/${encodeURIComponent(name)}`;
}

function semPath(name: string): string {
  return `/semaphores/${encodeURIComponent(name)}`;
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

function acquireBody(o: { ttlMs?: number | undefined; owner?: string | undefined; shared?: boolean | undefined; reentrant?: boolean | undefined }, lease: string, waitMs: number | undefined): Json {
  const body: Json = { lease };
  if (o.ttlMs !== undefined) body["ttl_ms"] = o.ttlMs;
  if (waitMs !== undefined && waitMs > 0) body["wait_ms"] = waitMs;
  if (o.owner !== undefined) body["owner"] = o.owner;
  if (o.shared === true) body["mode"] = "shared";
  if (o.reentrant === true) body["reentrant"] = true;
  return body;
}

/** A kept grant, before it is handed out. */
interface Taken<G> {
  grant: G;
  sentAt: number;
  keeper: Keeper;
  keepalive: "stream" | "extend" | "one-way";
}

/**
 * A client of one redlockd service (or a load balancer in front of several instances).
 *
 *     const client = new Client();                       // REDLOCK_URL, else http://127.0.0.1:8080
 *     await client.using("reports", { ttlMs: 10000 }, async (lock, signal) => { ... });
 *     await using lock = await client.hold("reports");   // released at the end of the scope
 */
export class Client {
  readonly url: string;
  private readonly transport: Transport;
  private readonly timeoutMs: number;
  private readonly retry: Required<{ [K in keyof RetrySettings]: number }>;

  constructor(options?: ClientOptions);
  constructor(url: string | undefined, options?: ClientOptions);
  constructor(a?: string | ClientOptions, b: ClientOptions = {}) {
    const options = typeof a === "object" ? a : b;
    const url = (typeof a === "string" ? a : undefined) ?? options.url ?? (process.env["REDLOCK_URL"] || undefined) ?? DEFAULT_URL;
    this.url = url.replace(/\/+$/, "");
    const token = options.token ?? (process.env["REDLOCK_TOKEN"] || undefined);
    this.transport = new Transport(this.url, token, options.tls);
    this.timeoutMs = options.timeoutMs ?? 10000;
    this.retry = {
      retryCount: options.retryCount ?? 10,
      retryDelay: options.retryDelay ?? 200,
      retryJitter: options.retryJitter ?? 200,
    };
  }

  /** Closes the pooled idle connections (held locks keep their own). */
  close(): void {
    this.transport.close();
  }

  // ---- locks --------------------------------------------------------------------------

  /**
   * Acquires `name` (POST /locks/{name}): exclusive, or `shared`, or with `reentrant` one
   * more hold of the lease you give.  Resolves to a Lock (the Grant, with its own
   * `extend()`, `release()` and `await using`); pass its `fencingToken` to the resource.
   * Throws LockHeldError (held, once the wait and the retries are spent),
   * QuorumUnavailableError, UnauthorizedError, RedlockError (any other code; `timeout`).
   */
  async acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    const lease = options.lease ?? newLease();
    const { grant, sentAt } = await this.retrying(options, async (waitMs) => {
      const sentAt = performance.now();
      const a = await this.call("POST", lockPath(name), `acquire "${name}"`, acquireBody(options, lease, waitMs), waitMs ?? 0, options.signal);
      return { grant: parseGrant(a), sentAt };
    });
    return new Lock(grant, sentAt, this.lockOps(grant.name, grant.lease));
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
   * Releases `lease` of `name` (DELETE).  A reentrant lease takes one hold back
   * (`released: false`, `holds` left).  Throws LeaseLostError if it is no longer held, and
   * ReleaseUnconfirmedError when the masters could not confirm it (the service finishes it;
   * stop using the resource all the same).  Never retried by this client.
   */
  async release(name: string, lease: string, options: RequestOptions = {}): Promise<Released> {
    return parseReleased(await this.call("DELETE", lockPath(name), `release "${name}"`, { lease }, 0, options.signal));
  }

  /**
   * Breaks `name` whatever its lease (DELETE ?force=true): a token marked +admin only
   * (UnauthorizedError "forbidden" otherwise).  The holder is not told; its fencing token,
   * smaller than every later grant's, is what keeps it off the resource.
   */
  async forceRelease(name: string, options: RequestOptions = {}): Promise<Released> {
    return parseReleased(await this.call("DELETE", lockPath(name) + "?force=true", `force release "${name}"`, undefined, 0, options.signal));
  }

  /**
   * The state of `name` (GET): held or not, owner, validity, latest fencing token, index,
   * readers; with `lease`, that lease's reentrant holds.  With `index` and `waitMs` it waits
   * until the index changes (or `waitMs` passes): one step of a watch.
   */
  async status(name: string, options: StatusOptions = {}): Promise<LockState> {
    const path = lockPath(name) + query({ index: options.index, wait_ms: options.waitMs, lease: options.lease });
    return parseLockState(await this.call("GET", path, `status "${name}"`, undefined, options.waitMs ?? 0, options.signal));
  }

  /**
   * Watches `name`: yields its state now, then each time it changes (a grant, a release,
   * an expiry, a handoff), until `signal` aborts (the loop then throws the signal's reason)
   * or you break out.  A call that fails for want of an answer or a quorum is tried again
   * after a pause (the retry settings' delay); other errors end the loop.
   *
   *     for await (const s of client.watch("reports", { signal })) console.log(s.held, s.owner);
   */
  async *watch(name: string, options: WatchOptions = {}): AsyncGenerator<LockState, void, undefined> {
    const waitMs = options.waitMs ?? 30000;
    let last: LockState | undefined;
    let failures = 0;
    for (;;) {
      let s: LockState;
      try {
        s = await this.status(name, last === undefined ? { signal: options.signal } : { index: last.index, waitMs, signal: options.signal });
        failures = 0;
      } catch (e) {
        if (options.signal?.aborted || !retriable(e, true)) throw e;
        await sleep(this.pause(this.retry, Math.min(failures++, 5)), options.signal);
        continue;
      }
      if (last === undefined || s.index !== last.index) yield s;
      last = s;
    }
  }

  /** The locks a quorum holds under `prefix` (GET /locks), each with owner, validity and token. */
  async list(options: ListOptions = {}): Promise<LockList> {
    const path = "/locks" + query({ prefix: options.prefix, limit: options.limit });
    return parseLockList(await this.call("GET", path, "list", undefined, 0, options.signal));
  }

  /**
   * Acquires `name` and keeps it until `release()` (or the end of an `await using` scope),
   * by a duplex stream (default: pings answered with the validity left) or extensions
   * (`keepalive: "extend"`).  The returned lock's `signal` aborts the moment this process
   * can no longer be sure it holds the lock: a local timer at the end of the last validity,
   * counted from the send of the request (or ping) that got it.  Throws as `acquire` does.
   */
  async hold(name: string, options: HoldOptions = {}): Promise<HeldLock> {
    const what = `hold "${name}"`;
    const extendLease = options.lease ?? newLease();
    const taken = await this.retrying(options, async (waitMs) => {
      // A streamed try takes a lease of its own (unless you gave one): a stream whose
      // grant was lost on the way is let go by the service at the validity it told, by
      // its lease, which must not be a later try's.  An extension-kept try repeats its
      // lease (an idempotent retry gets a lost grant back).
      const lease = options.keepalive === "extend" ? extendLease : options.lease ?? newLease();
      if (options.keepalive === "extend") {
        const sentAt = performance.now();
        const a = await this.call("POST", lockPath(name), what, acquireBody(options, lease, waitMs), waitMs ?? 0, options.signal);
        const grant = parseGrant(a);
        return this.confirmed(this.extendKept(grant, sentAt, this.lockOps(grant.name, grant.lease)), options);
      }
      return this.confirmed(await this.holdStream(lockPath(name), what, acquireBody(options, lease, waitMs), waitMs, options, parseGrant, (g) => this.lockOps(g.name, g.lease)), options);
    }, streamWithYourLease(options));
    return taken;
  }

  /**
   * Holds `name` (as `hold` does) while `routine(lock, signal)` runs, then releases it, and
   * resolves to what the routine returned (or rejects with what it threw) -- node-redlock's
   * `using`.  `signal` aborts if the lock is lost meanwhile (or `options.signal` aborts):
   * stop touching the resource then.  The routine's result is returned even if the lock
   * was lost; check `signal.aborted` if that matters.
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

  // ---- sets of names ------------------------------------------------------------------

  /**
   * Acquires every name of `names` at once, all or nothing (POST /locks), under one lease,
   * each with its own fencing token; `modes` makes some of them shared.  Resolves to a
   * LockSet (release(), extend(), `await using`).  Throws as `acquire` does.
   */
  async acquireMany(names: readonly string[], options: SetOptions = {}): Promise<LockSet> {
    const { grant, sentAt } = await this.acquireSet(names, options);
    return new LockSet(grant, sentAt, this.setOps(grant));
  }

  /** Releases the set that `lease` holds (DELETE /locks).  Throws LeaseLostError if it is gone. */
  async releaseMany(lease: string, options: RequestOptions = {}): Promise<MultiReleased> {
    return parseMultiReleased(await this.call("DELETE", "/locks", "release set", { lease }, 0, options.signal));
  }

  /**
   * Acquires the set (as `acquireMany`) and keeps it by extensions (a PATCH of each name
   * every third of the ttl; the service has no streamed hold for sets) until `release()`.
   * Its `signal` aborts when any name is lost, or at the validity's end.
   */
  async holdMany(names: readonly string[], options: SetOptions = {}): Promise<HeldLockSet> {
    const lease = options.lease ?? newLease();
    return this.retrying(options, async (waitMs) => {
      const { grant, sentAt } = await this.acquireSet(names, { ...options, lease, waitMs: waitMs, retryCount: 0 });
      const ops = this.setOps(grant);
      const keeper = new ExtendKeeper(
        (limit, signal) => ops.extend(grant.ttlMs, signal, limit).then((x) => x.validityMs),
        (limit) => this.releaseQuietly(() => ops.release(undefined, limit).then(() => true)),
        grant.ttlMs,
        sentAt,
        grant.validityMs,
        this.timeoutMs,
      );
      const confirm = this.mustConfirm(sentAt, grant.validityMs, grant.ttlMs);
      const held = new KeptSet(grant, sentAt + grant.validityMs, confirm, keeper, this.timeoutMs);
      return this.confirmed(held, options);
    });
  }

  /** Holds the set (as `holdMany`) while `routine(set, signal)` runs, then releases it. */
  async usingMany<T>(names: readonly string[], options: SetOptions, routine: UsingSetRoutine<T>): Promise<T> {
    if (typeof routine !== "function") throw new TypeError("usingMany(names, options, routine): routine must be a function");
    const set = await this.holdMany(names, options);
    try {
      return await routine(set, set.signal);
    } finally {
      await set.release();
    }
  }

  // ---- semaphores ---------------------------------------------------------------------

  /**
   * Takes one of the `permits` permits of the semaphore `name` (POST /semaphores/{name}):
   * at most that many holders at once.  Resolves to a Permit (a grant with its `slot`, its
   * own extend and release).  Throws LockHeldError when every permit is taken (after the
   * wait and the retries), PermitsMismatchError when the semaphore is in use with another
   * number of permits, and as `acquire` does.
   */
  async acquirePermit(name: string, options: PermitOptions): Promise<Permit> {
    const lease = options.lease ?? newLease();
    const { grant, sentAt } = await this.retrying(options, async (waitMs) => {
      const sentAt = performance.now();
      const body = { ...acquireBody(options, lease, waitMs), permits: options.permits };
      return { grant: parsePermitGrant(await this.call("POST", semPath(name), `acquire permit "${name}"`, body, waitMs ?? 0, options.signal)), sentAt };
    });
    return new Permit(grant, sentAt, this.permitOps(grant.name, grant.lease));
  }

  /** Gives back the permit of `name` that `lease` holds (DELETE).  Throws LeaseLostError if gone. */
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

  /** Takes a permit and keeps it until `release()`, as `hold` keeps a lock. */
  async holdSemaphore(name: string, options: PermitHoldOptions): Promise<HeldPermit> {
    const what = `hold a permit of "${name}"`;
    const extendLease = options.lease ?? newLease();
    return this.retrying(options, async (waitMs) => {
      const lease = options.keepalive === "extend" ? extendLease : options.lease ?? newLease(); // as in hold()
      const body = { ...acquireBody(options, lease, waitMs), permits: options.permits };
      if (options.keepalive === "extend") {
        const sentAt = performance.now();
        const grant = parsePermitGrant(await this.call("POST", semPath(name), what, body, waitMs ?? 0, options.signal));
        return this.confirmed(this.extendKept(grant, sentAt, this.permitOps(grant.name, grant.lease)), options);
      }
      return this.confirmed(await this.holdStream(semPath(name), what, body, waitMs, options, parsePermitGrant, (g) => this.permitOps(g.name, g.lease)), options);
    }, streamWithYourLease(options));
  }

  /** Holds a permit of `name` (as `holdSemaphore`) while `routine(permit, signal)` runs, then releases it. */
  async usingSemaphore<T>(name: string, options: PermitHoldOptions, routine: UsingPermitRoutine<T>): Promise<T> {
    if (typeof routine !== "function") throw new TypeError("usingSemaphore(name, options, routine): routine must be a function");
    const permit = await this.holdSemaphore(name, options);
    try {
      return await routine(permit, permit.signal);
    } finally {
      await permit.release();
    }
  }

  // ---- elections and health -------------------------------------------------------------

  /** An election on the lock `name` (campaign, resign, leader, observe): see Election. */
  election(name: string, options: ElectionOptions = {}): Election {
    return new Election(this, name, options);
  }

  /** GET /healthz: the process serves HTTP (and each master's last known state). */
  async health(options: RequestOptions = {}): Promise<Health> {
    return parseHealth(await this.call("GET", "/healthz", "health", undefined, 0, options.signal));
  }

  /** GET /readyz: whether a quorum of masters answers now (`ready`; a 503 is an answer here, not an error). */
  async ready(options: RequestOptions = {}): Promise<Health> {
    const a = await this.transport.request("GET", "/readyz", undefined, { timeoutMs: this.timeoutMs, signal: options.signal, what: "ready" });
    if (a.status !== 200 && a.status !== 503) throw answerError(a.status, a.headers, a.json, "ready");
    return parseHealth(a.json);
  }

  /** GET /metrics: the Prometheus text exposition. */
  async metrics(options: RequestOptions = {}): Promise<string> {
    const a = await this.transport.request("GET", "/metrics", undefined, { timeoutMs: this.timeoutMs, signal: options.signal, what: "metrics" });
    if (a.status !== 200) throw answerError(a.status, a.headers, a.json, "metrics");
    return a.text;
  }

  // ---- inside ---------------------------------------------------------------------------

  /** The pause before try i+1: retryDelay ± retryJitter (node-redlock's), at least 0. */
  private pause(r: Required<{ [K in keyof RetrySettings]: number }>, _i: number): number {
    return Math.max(0, r.retryDelay + Math.floor((Math.random() * 2 - 1) * r.retryJitter));
  }

  /** Runs `attempt` again, with the same lease, while it fails in a way that may pass. */
  private async retrying<T>(
    o: RetrySettings & { waitMs?: number | undefined; signal?: AbortSignal | undefined },
    attempt: (waitMs: number | undefined) => Promise<T>,
    answerLostIsFinal = false,
  ): Promise<T> {
    const r = {
      retryCount: o.retryCount ?? this.retry.retryCount,
      retryDelay: o.retryDelay ?? this.retry.retryDelay,
      retryJitter: o.retryJitter ?? this.retry.retryJitter,
    };
    const start = performance.now();
    const waited = o.waitMs !== undefined && o.waitMs > 0;
    for (let i = 0; ; i++) {
      // Each try waits only for what is left of the caller's wait.
      const waitMs = o.waitMs === undefined ? undefined : Math.max(0, Math.round(o.waitMs - (performance.now() - start)));
      try {
        return await attempt(waitMs);
      } catch (e) {
        if (o.signal?.aborted || !retriable(e, waited) || (r.retryCount >= 0 && i >= r.retryCount)) throw e;
        if (answerLostIsFinal && e instanceof RedlockError && (e.code === "timeout" || e.code === "connection_failed")) throw e;
      }
      await sleep(this.pause(r, i), o.signal);
    }
  }

  /** Whether a grant sent at `sentAt` came too late to count on (its first renewal was due). */
  private mustConfirm(sentAt: number, validityMs: number, ttlMs: number): boolean {
    const now = performance.now();
    return now >= sentAt + Math.max(1, Math.min(ttlMs / 3, validityMs / 2)) || now >= sentAt + validityMs;
  }

  /** Starts a kept hold and waits, if it must, for its first renewal; else releases it and throws. */
  private async confirmed<H extends KeptLock | KeptPermit | KeptSet>(held: H, o: { signal?: AbortSignal | undefined }): Promise<H> {
    held.begin(o.signal);
    try {
      await held.confirmed(this.timeoutMs);
    } catch (e) {
      void held.release();
      throw e;
    }
    return held;
  }

  private extendKept<G extends Grant>(grant: G, sentAt: number, ops: GrantOps<unknown, Extension>): G extends PermitGrant ? KeptPermit : KeptLock {
    const keeper = new ExtendKeeper(
      (limit, signal) => ops.extend(grant.ttlMs, signal, limit).then((x) => x.validityMs),
      (limit) => this.releaseQuietly(() => ops.release(undefined, limit).then(() => true)),
      grant.ttlMs,
      sentAt,
      grant.validityMs,
      this.timeoutMs,
    );
    const confirm = this.mustConfirm(sentAt, grant.validityMs, grant.ttlMs);
    const deadline = sentAt + grant.validityMs;
    return ("slot" in grant
      ? new KeptPermit(grant as unknown as PermitGrant, deadline, confirm, keeper, "extend", this.timeoutMs)
      : new KeptLock(grant, deadline, confirm, keeper, "extend", this.timeoutMs)) as G extends PermitGrant ? KeptPermit : KeptLock;
  }

  /** A release that resolves false instead of throwing. */
  private async releaseQuietly(f: () => Promise<boolean>): Promise<boolean> {
    try {
      return await f();
    } catch {
      return false;
    }
  }

  /**
   * One try of a streamed hold: the duplex request, the grant line, the keeper.  A service
   * that answers with a one-way stream (201) is kept by extensions instead.
   */
  private async holdStream<G extends Grant>(
    path: string,
    what: string,
    body: Json,
    waitMs: number | undefined,
    o: { signal?: AbortSignal | undefined },
    parse: (v: unknown) => G,
    ops: (g: G) => GrantOps<unknown, Extension>,
  ): Promise<G extends PermitGrant ? KeptPermit : KeptLock> {
    const limit = this.timeoutMs + (waitMs ?? 0);
    const sentAt = performance.now();
    const opened = await this.transport.openDuplex(path, { ...body, hold: "stream" }, { timeoutMs: limit, signal: o.signal, what });
    const left = () => limit - (performance.now() - sentAt);
    if (opened.kind === "answer") {
      const type = header(opened.headers, "content-type") ?? "";
      if (opened.status !== 201 || !type.startsWith("application/x-ndjson")) {
        const text = await readBody(opened.body, left(), what);
        throw answerError(opened.status, opened.headers, parseJson(text), what);
      }
      // A one-way stream: this service has no duplex holds.
      const splitter = new LineSplitter();
      const { line, rest } = await firstLine(opened.body, Buffer.alloc(0), splitter, left(), o.signal, what);
      const grant = this.takeGrant(line, parse, () => opened.body.destroy(), what);
      const g = ops(grant);
      const keeper = new OneWayKeeper(
        opened.body,
        splitter,
        rest,
        (lim, signal) => g.extend(grant.ttlMs, signal, lim).then((x) => x.validityMs),
        (lim) => this.releaseQuietly(() => g.release(undefined, lim).then(() => true)),
        grant.ttlMs,
        sentAt,
        grant.validityMs,
        this.timeoutMs,
      );
      return this.kept({ grant, sentAt, keeper, keepalive: "one-way" });
    }
    const splitter = new LineSplitter();
    const socket = opened.socket;
    let first: { line: string; rest: string[] };
    try {
      first = await firstLine(socket, opened.head, splitter, left(), o.signal, what);
    } catch (e) {
      socket.destroy();
      throw e;
    }
    const grant = this.takeGrant(first.line, parse, () => socket.write('{"release":true}\n', () => socket.destroy()), what);
    const pingMs = parseDuplexGrant(parseJson(first.line)).pingMs ?? Math.max(1, Math.floor(grant.ttlMs / 4));
    const keeper = new DuplexKeeper(socket, splitter, first.rest, pingMs);
    return this.kept({ grant, sentAt, keeper, keepalive: "stream" });
  }

  private takeGrant<G>(line: string, parse: (v: unknown) => G, giveUp: () => void, what: string): G {
    try {
      return parse(parseJson(line));
    } catch (e) {
      giveUp();
      throw e instanceof RedlockError ? new RedlockError(e.code, `${what}: ${e.message}`) : e;
    }
  }

  private kept<G extends Grant>(t: Taken<G>): G extends PermitGrant ? KeptPermit : KeptLock {
    const confirm = this.mustConfirm(t.sentAt, t.grant.validityMs, t.grant.ttlMs);
    const deadline = t.sentAt + t.grant.validityMs;
    return ("slot" in t.grant
      ? new KeptPermit(t.grant as unknown as PermitGrant, deadline, confirm, t.keeper, t.keepalive, this.timeoutMs)
      : new KeptLock(t.grant, deadline, confirm, t.keeper, t.keepalive, this.timeoutMs)) as G extends PermitGrant ? KeptPermit : KeptLock;
  }

  private async acquireSet(names: readonly string[], options: SetOptions): Promise<{ grant: MultiGrant; sentAt: number }> {
    const lease = options.lease ?? newLease();
    return this.retrying(options, async (waitMs) => {
      const body: Json = { names: [...names], lease };
      if (options.ttlMs !== undefined) body["ttl_ms"] = options.ttlMs;
      if (waitMs !== undefined && waitMs > 0) body["wait_ms"] = waitMs;
      if (options.modes !== undefined) body["modes"] = { ...options.modes };
      const sentAt = performance.now();
      return { grant: parseMultiGrant(await this.call("POST", "/locks", "acquire set", body, waitMs ?? 0, options.signal)), sentAt };
    });
  }

  private lockOps(name: string, lease: string): GrantOps<Released, Extension> {
    return {
      extend: async (ttlMs, signal, limitMs) => {
        const body: Json = { lease };
        if (ttlMs !== undefined) body["ttl_ms"] = ttlMs;
        const sentAt = performance.now();
        const x = parseExtension(await this.callWithin("PATCH", lockPath(name), `extend "${name}"`, body, limitMs ?? this.timeoutMs, signal));
        return { sentAt, validityMs: x.validityMs, answer: x };
      },
      release: async (signal, limitMs) =>
        parseReleased(await this.callWithin("DELETE", lockPath(name), `release "${name}"`, { lease }, limitMs ?? this.timeoutMs, signal)),
    };
  }

  private permitOps(name: string, lease: string): GrantOps<void, Extension> {
    return {
      extend: async (ttlMs, signal, limitMs) => {
        const body: Json = { lease };
        if (ttlMs !== undefined) body["ttl_ms"] = ttlMs;
        const sentAt = performance.now();
        const x = parseExtension(await this.callWithin("PATCH", semPath(name), `extend permit "${name}"`, body, limitMs ?? this.timeoutMs, signal));
        return { sentAt, validityMs: x.validityMs, answer: x };
      },
      release: async (signal, limitMs) => {
        await this.callWithin("DELETE", semPath(name), `release permit "${name}"`, { lease }, limitMs ?? this.timeoutMs, signal);
      },
    };
  }

  private setOps(grant: MultiGrant): GrantOps<MultiReleased, readonly Extension[]> {
    return {
      extend: async (ttlMs, signal, limitMs) => {
        const sentAt = performance.now();
        const xs = await Promise.all(
          grant.names.map((n) => {
            const body: Json = { lease: grant.lease };
            if (ttlMs !== undefined) body["ttl_ms"] = ttlMs;
            return this.callWithin("PATCH", lockPath(n), `extend "${n}"`, body, limitMs ?? this.timeoutMs, signal).then(parseExtension);
          }),
        );
        return { sentAt, validityMs: Math.min(...xs.map((x) => x.validityMs)), answer: xs };
      },
      release: async (signal, limitMs) =>
        parseMultiReleased(await this.callWithin("DELETE", "/locks", "release set", { lease: grant.lease }, limitMs ?? this.timeoutMs, signal)),
    };
  }

  /** One call; a non-2xx answer throws its RedlockError.  Limit: timeoutMs + waitMs. */
  private call(method: string, path: string, what: string, body: Json | undefined, waitMs: number, signal: AbortSignal | undefined): Promise<unknown> {
    return this.callWithin(method, path, what, body, this.timeoutMs + waitMs, signal);
  }

  private async callWithin(method: string, path: string, what: string, body: Json | undefined, limitMs: number, signal: AbortSignal | undefined): Promise<unknown> {
    const a: Answer = await this.transport.request(method, path, body, { timeoutMs: limitMs, signal, what } satisfies CallOptions);
    if (a.status < 200 || a.status >= 300) throw answerError(a.status, a.headers, a.json, what);
    if (a.json === undefined) {
      throw new RedlockError("bad_response", `${what}: HTTP ${a.status} with a body that is not JSON`, {
        status: a.status,
        requestId: header(a.headers, "x-request-id") ?? null,
      });
    }
    return a.json;
  }
}

/**
 * The first line of a stream (a duplex hold's grant line, or a one-way stream's), within
 * `limitMs`; `rest`: lines that came with it.  The stream is paused after it.
 */
function firstLine(
  stream: NodeJS.ReadableStream & { destroy(): void; pause(): unknown; resume(): unknown },
  head: Buffer,
  splitter: LineSplitter,
  limitMs: number,
  signal: AbortSignal | undefined,
  what: string,
): Promise<{ line: string; rest: string[] }> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err: unknown, v?: { line: string; rest: string[] }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stream.pause();
      stream.removeListener("data", onData);
      stream.removeListener("end", onEnd);
      stream.removeListener("error", onError);
      signal?.removeEventListener("abort", onAbort);
      if (err !== undefined) reject(err);
      else resolve(v!);
    };
    const take = (chunk: Buffer) => {
      let lines: string[];
      try {
        lines = splitter.push(chunk);
      } catch (e) {
        finish(e);
        return;
      }
      if (lines.length > 0) finish(undefined, { line: lines[0]!, rest: lines.slice(1) });
    };
    const onData = (c: Buffer) => take(c);
    const onEnd = () => finish(new RedlockError("connection_failed", `${what}: the connection ended before the grant`));
    const onError = (e: Error) => finish(new RedlockError("connection_failed", `${what}: ${e.message}`, { cause: e }));
    const onAbort = () => finish(signal!.reason);
    const timer = setTimeout(() => finish(new RedlockError("timeout", `${what}: no grant line within the time left`)), Math.max(0, limitMs));
    signal?.addEventListener("abort", onAbort, { once: true });
    if (head.length > 0) take(head);
    if (done) return;
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
    stream.resume();
  });
}
