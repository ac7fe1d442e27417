// wire.ts -- the service's JSON answers, checked and turned into this client's camelCase
// objects; and the line reader of a streamed hold (application/x-ndjson).

import { RedlockError } from "./errors.js";

/** A grant (201 of POST /locks/{name}). */
export interface Grant {
  readonly name: string;
  /** The secret that releases or extends this grant. Never log it. */
  readonly lease: string;
  /** Strictly larger for every later grant of this name: pass it to the resource. */
  readonly fencingToken: number;
  /** How long you may assume you hold the lock, in ms from the answer. */
  readonly validityMs: number;
  readonly ttlMs: number;
  /** A read hold (`shared: true` asked for it); its fencing token is the last writer's. */
  readonly shared: boolean;
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

/** A line of a streamed hold after the grant. */
export type HoldEvent =
  | { readonly event: "extended"; readonly validityMs: number }
  | { readonly event: "lost"; readonly reason: "no_quorum" | "lease_lost" }
  | { readonly event: "released"; readonly reason: "shutting_down" | undefined };

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

export function parseHoldEvent(v: unknown): HoldEvent {
  const o = obj(v, "stream line");
  switch (o["event"]) {
    case "extended":
      return { event: "extended", validityMs: int(o, "validity_ms", "stream line") };
    case "lost": {
      const r = o["reason"];
      // A reason this client does not know yet is still a loss; lease_lost is the safe reading.
      return { event: "lost", reason: r === "no_quorum" ? "no_quorum" : "lease_lost" };
    }
    case "released":
      return { event: "released", reason: o["reason"] === "shutting_down" ? "shutting_down" : undefined };
    default:
      throw bad("stream line", o);
  }
}

/** Where a held lock's lines come from: `null` once they end; rejects if they break. */
export interface Lines {
  next(): Promise<string | null>;
}

/** Reads a byte stream as lines (without their "\n"); `null` at the end of the stream. */
export class LineReader implements Lines {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private buffered = "";
  private ended = false;

  constructor(body: ReadableStream<Uint8Array>) {
    this.reader = body.getReader();
  }

  /** The next non-empty line, or null when the stream ended. Rejects if the stream breaks. */
  async next(): Promise<string | null> {
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl >= 0) {
        const line = this.buffered.slice(0, nl).trim();
        this.buffered = this.buffered.slice(nl + 1);
        if (line !== "") return line;
        continue;
      }
      if (this.ended) {
        const rest = this.buffered.trim();
        this.buffered = "";
        return rest === "" ? null : rest;
      }
      const { done, value } = await this.reader.read();
      if (done) {
        this.buffered += this.decoder.decode();
        this.ended = true;
      } else {
        this.buffered += this.decoder.decode(value, { stream: true });
      }
    }
  }
}
