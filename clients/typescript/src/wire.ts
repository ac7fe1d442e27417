// wire.ts -- the service's JSON answers, checked and turned into this client's camelCase
// objects.

import { RedlockError } from "./errors.js";

/** A grant (201 of POST /locks/{name}). */
export interface Grant {
  readonly name: string;
  /** The secret that releases or extends this grant. Never log it. */
  readonly lease: string;
  /** Strictly larger for every later grant of this name: pass it to the resource. */
  readonly fencingToken: number;
  /**
   * How long you may assume you hold the lock, in ms, counted from when the request was
   * SENT (not from the answer's arrival: it may have spent any time on the way).
   */
  readonly validityMs: number;
  readonly ttlMs: number;
  /** A read hold (`shared: true` asked for it); its fencing token is the last writer's. */
  readonly shared: boolean;
  /** How many reentrant holds this lease has (1 for a plain grant; see `reentrant`). */
  readonly holds: number;
}

/** A permit of a semaphore (201 of POST /semaphores/{name}). */
export interface PermitGrant extends Grant {
  /** The semaphore's number of permits. */
  readonly permits: number;
  /** This permit's slot, 0..permits-1; its fencing token is T*1024+slot. */
  readonly slot: number;
}

/** An extension (200 of PATCH /locks/{name} or /semaphores/{name}). */
export interface Extension {
  readonly name: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
}

/** A lock's state (200 of GET /locks/{name}); never the lease. */
export interface LockState {
  readonly name: string;
  /** Whether a quorum of masters holds it now. */
  readonly held: boolean;
  /** Who the grant said it was for; null when free or granted without an owner. */
  readonly owner: string | null;
  /** How long a quorum still holds it (0 when free; -1 for a key without expiry). */
  readonly validityMs: number;
  /** The latest fencing token of the name (0 if never granted). */
  readonly fencingToken: number;
  /** Opaque; changes with every grant, release, expiry or handoff. Give it back to watch. */
  readonly index: string;
  /** How many shared holders hold it now. */
  readonly readers: number;
  /** The reentrant hold count of the lease given to status() (absent without one). */
  readonly holds?: number;
}

/** A semaphore's state (200 of GET /semaphores/{name}). */
export interface SemaphoreState {
  readonly name: string;
  /** The number of permits its holders use; null when none was granted within the longest ttl. */
  readonly permits: number | null;
  /** Permits held now. */
  readonly held: number;
  /** permits - held; null when permits is. */
  readonly free: number | null;
}

/** One lock of a list (GET /locks). */
export interface ListedLock {
  readonly name: string;
  readonly owner: string | null;
  readonly validityMs: number;
  readonly fencingToken: number;
}

/** The held locks under a prefix (200 of GET /locks). */
export interface LockList {
  /** The prefix listed (a scoped token's may be narrower than the one asked for). */
  readonly prefix: string;
  readonly locks: readonly ListedLock[];
  /** Names may be missing: narrow the prefix. */
  readonly truncated: boolean;
}

type Obj = { readonly [k: string]: unknown };

function bad(what: string, v: unknown): RedlockError {
  return new RedlockError("bad_response", `unexpected ${what}: ${JSON.stringify(v)?.slice(0, 200)}`);
}

function obj(v: unknown, what: string): Obj {
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw bad(what, v);
  return v as Obj;
}

function str(o: Obj, k: string, what: string): string {
  const v = o[k];
  if (typeof v !== "string") throw bad(what, o);
  return v;
}

function int(o: Obj, k: string, what: string): number {
  const v = o[k];
  if (typeof v !== "number" || !Number.isInteger(v)) throw bad(what, o);
  return v;
}

function owner(o: Obj, what: string): string | null {
  const v = o["owner"];
  if (v === undefined || v === null) return null;
  if (typeof v !== "string") throw bad(what, o);
  return v;
}

export function parseGrant(v: unknown): Grant {
  const o = obj(v, "grant");
  return {
    name: str(o, "name", "grant"),
    lease: str(o, "lease", "grant"),
    fencingToken: int(o, "fencing_token", "grant"),
    validityMs: int(o, "validity_ms", "grant"),
    ttlMs: int(o, "ttl_ms", "grant"),
    shared: o["mode"] === "shared",
    holds: o["holds"] === undefined ? 1 : int(o, "holds", "grant"),
  };
}

export function parsePermitGrant(v: unknown): PermitGrant {
  const o = obj(v, "permit");
  return { ...parseGrant(o), permits: int(o, "permits", "permit"), slot: int(o, "slot", "permit") };
}

function intOrNull(o: Obj, k: string, what: string): number | null {
  return o[k] === null ? null : int(o, k, what);
}

export function parseSemaphoreState(v: unknown): SemaphoreState {
  const o = obj(v, "semaphore state");
  return {
    name: str(o, "name", "semaphore state"),
    permits: intOrNull(o, "permits", "semaphore state"),
    held: int(o, "held", "semaphore state"),
    free: intOrNull(o, "free", "semaphore state"),
  };
}

export function parseExtension(v: unknown): Extension {
  const o = obj(v, "extension");
  return {
    name: str(o, "name", "extension"),
    fencingToken: int(o, "fencing_token", "extension"),
    validityMs: int(o, "validity_ms", "extension"),
    ttlMs: int(o, "ttl_ms", "extension"),
  };
}

export function parseLockState(v: unknown): LockState {
  const o = obj(v, "lock state");
  if (typeof o["held"] !== "boolean") throw bad("lock state", o);
  return {
    name: str(o, "name", "lock state"),
    held: o["held"],
    owner: owner(o, "lock state"),
    validityMs: int(o, "validity_ms", "lock state"),
    fencingToken: int(o, "fencing_token", "lock state"),
    index: str(o, "index", "lock state"),
    readers: o["readers"] === undefined ? 0 : int(o, "readers", "lock state"),
    ...(o["holds"] === undefined ? {} : { holds: int(o, "holds", "lock state") }),
  };
}

export function parseLockList(v: unknown): LockList {
  const o = obj(v, "lock list");
  const locks = o["locks"];
  if (!Array.isArray(locks) || typeof o["truncated"] !== "boolean") throw bad("lock list", o);
  return {
    prefix: str(o, "prefix", "lock list"),
    locks: locks.map((l: unknown) => {
      const e = obj(l, "listed lock");
      return {
        name: str(e, "name", "listed lock"),
        owner: owner(e, "listed lock"),
        validityMs: int(e, "validity_ms", "listed lock"),
        fencingToken: int(e, "fencing_token", "listed lock"),
      };
    }),
    truncated: o["truncated"],
  };
}

/** The answer to a release (DELETE /locks/{name}). */
export interface Released {
  readonly name: string;
  /** true: the lock is released; false: a reentrant lease took one hold back (see `holds`). */
  readonly released: boolean;
  /** The reentrant holds left (0 once released). */
  readonly holds: number;
  /** The lock was broken whatever its lease (forceRelease). */
  readonly forced: boolean;
}

export function parseReleased(v: unknown): Released {
  const o = obj(v, "release");
  if (typeof o["released"] !== "boolean") throw bad("release", o);
  return {
    name: str(o, "name", "release"),
    released: o["released"],
    holds: o["holds"] === undefined ? 0 : int(o, "holds", "release"),
    forced: o["forced"] === true,
  };
}

/** A set of names granted together (201 of POST /locks). */
export interface MultiGrant {
  /** The names, in the order asked. */
  readonly names: readonly string[];
  /** One lease for the whole set. Never log it. */
  readonly lease: string;
  /** Each name's fencing token (a name held shared carries its current one). */
  readonly fencingTokens: { readonly [name: string]: number };
  /** Each name's mode. */
  readonly modes: { readonly [name: string]: "shared" | "exclusive" };
  /** As a Grant's: counted from the request's send. */
  readonly validityMs: number;
  readonly ttlMs: number;
}

function intMap(v: unknown, what: string): { [k: string]: number } {
  const o = obj(v, what);
  const out: { [k: string]: number } = {};
  for (const [k, x] of Object.entries(o)) {
    if (typeof x !== "number" || !Number.isInteger(x)) throw bad(what, o);
    out[k] = x;
  }
  return out;
}

function names(o: Obj, what: string): string[] {
  const n = o["names"];
  if (!Array.isArray(n) || !n.every((x) => typeof x === "string")) throw bad(what, o);
  return n as string[];
}

export function parseMultiGrant(v: unknown): MultiGrant {
  const o = obj(v, "set grant");
  const ns = names(o, "set grant");
  const modes: { [k: string]: "shared" | "exclusive" } = {};
  const m = o["modes"] === undefined ? {} : obj(o["modes"], "set grant");
  for (const n of ns) modes[n] = m[n] === "shared" ? "shared" : "exclusive";
  return {
    names: ns,
    lease: str(o, "lease", "set grant"),
    fencingTokens: intMap(o["fencing_tokens"], "set grant"),
    modes,
    validityMs: int(o, "validity_ms", "set grant"),
    ttlMs: int(o, "ttl_ms", "set grant"),
  };
}

/** The answer to a set's release (DELETE /locks). */
export interface MultiReleased {
  readonly names: readonly string[];
  readonly released: boolean;
}

export function parseMultiReleased(v: unknown): MultiReleased {
  const o = obj(v, "set release");
  return { names: names(o, "set release"), released: o["released"] === true };
}

/** A master as /healthz and /readyz show it. */
export interface MasterHealth {
  readonly address: string;
  readonly ok: boolean;
  readonly state: string;
  readonly latencyMs: number | null;
}

/** The service's health (GET /healthz, GET /readyz). */
export interface Health {
  /** Whether a quorum of masters is usable. */
  readonly ready: boolean;
  readonly quorum: number;
  readonly masters: readonly MasterHealth[];
}

export function parseHealth(v: unknown): Health {
  const o = obj(v, "health");
  const ms = o["masters"];
  if (typeof o["ready"] !== "boolean" || !Array.isArray(ms)) throw bad("health", o);
  return {
    ready: o["ready"],
    quorum: int(o, "quorum", "health"),
    masters: ms.map((m: unknown) => {
      const e = obj(m, "master health");
      const l = e["latency_ms"];
      return {
        address: str(e, "address", "master health"),
        ok: e["ok"] === true,
        state: str(e, "state", "master health"),
        latencyMs: typeof l === "number" ? l : null,
      };
    }),
  };
}

/** The first line of a duplex hold: the grant, and how often to ping. */
export function parseDuplexGrant(v: unknown): { grant: unknown; pingMs: number | undefined } {
  const o = obj(v, "grant line");
  const p = o["ping_ms"];
  return { grant: o, pingMs: typeof p === "number" && Number.isInteger(p) && p > 0 ? p : undefined };
}
