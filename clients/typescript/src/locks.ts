// locks.ts -- what the client hands out: a plain grant with its own release and extend
// (Lock, Permit, LockSet: node-redlock's shape), and the kept holds (HeldLock, HeldPermit,
// HeldLockSet: a grant, and the belief of hold.ts).

import { asyncDispose } from "./dispose.js";
import { LeaseLostError, ReleaseUnconfirmedError } from "./errors.js";
import { type Held, Kept, type Keeper, lossMarginMs } from "./hold.js";
import type { Extension, Grant, MultiGrant, MultiReleased, PermitGrant, Released } from "./wire.js";

/** How a plain grant extends and releases itself (bound to its client by the client). */
export interface GrantOps<R, X = Extension | readonly Extension[]> {
  /** An extension to `ttlMs`, within `limitMs` (default: the client's timeout); its validity counts from `sentAt`. */
  extend(ttlMs: number | undefined, signal: AbortSignal | undefined, limitMs?: number): Promise<{ sentAt: number; validityMs: number; answer: X }>;
  release(signal: AbortSignal | undefined, limitMs?: number): Promise<R>;
}

/** What Lock, Permit and LockSet share: the validity counted from the send, extend, release. */
abstract class Granted<R> implements AsyncDisposable {
  /** performance.now() when the request that granted it was sent. */
  readonly sentAt: number;
  private until: number;

  constructor(
    private readonly ops: GrantOps<R>,
    sentAt: number,
    validityMs: number,
  ) {
    this.sentAt = sentAt;
    this.until = sentAt + validityMs;
  }

  /**
   * How much longer, in ms, you may assume you hold it: its validity (or the last
   * extension's) counted from the send of its request.  Nothing renews it by itself: use
   * `hold` (or `holdSemaphore`, `holdMany`) for that.
   */
  get remainingMs(): number {
    return Math.max(0, this.until - performance.now());
  }

  protected async extendBy(ttlMs: number | undefined, signal: AbortSignal | undefined): Promise<Extension | readonly Extension[]> {
    const x = await this.ops.extend(ttlMs, signal);
    this.until = Math.max(this.until, x.sentAt + x.validityMs);
    return x.answer;
  }

  /** Releases it (DELETE with its lease).  Throws LeaseLostError if it was no longer held. */
  release(options: { signal?: AbortSignal | undefined } = {}): Promise<R> {
    const r = this.ops.release(options.signal);
    void r.then(
      () => (this.until = 0),
      () => {},
    );
    return r;
  }

  /**
   * `await using lock = await client.acquire(...)`: release() at the end of the scope.  A
   * lease already gone, or a release the service finishes by itself (release_unconfirmed),
   * is not an error here: either way this process is done with the lock.
   */
  async [asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof LeaseLostError) && !(e instanceof ReleaseUnconfirmedError)) throw e;
    }
  }
}

/** A granted lock (Client.acquire): the Grant, and its own extend and release. */
export class Lock extends Granted<Released> implements Grant {
  readonly name: string;
  readonly lease: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
  readonly shared: boolean;
  readonly holds: number;

  constructor(grant: Grant, sentAt: number, ops: GrantOps<Released>) {
    super(ops, sentAt, grant.validityMs);
    this.name = grant.name;
    this.lease = grant.lease;
    this.fencingToken = grant.fencingToken;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
    this.shared = grant.shared;
    this.holds = grant.holds;
  }

  /** Extends it to `ttlMs` from now (PATCH); `remainingMs` counts from this call's send. */
  async extend(options: { ttlMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<Extension> {
    return (await this.extendBy(options.ttlMs, options.signal)) as Extension;
  }
}

/** A granted permit of a semaphore (Client.acquirePermit). */
export class Permit extends Granted<void> implements PermitGrant {
  readonly name: string;
  readonly lease: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
  readonly shared: boolean;
  readonly holds: number;
  readonly permits: number;
  readonly slot: number;

  constructor(grant: PermitGrant, sentAt: number, ops: GrantOps<void>) {
    super(ops, sentAt, grant.validityMs);
    this.name = grant.name;
    this.lease = grant.lease;
    this.fencingToken = grant.fencingToken;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
    this.shared = false;
    this.holds = 1;
    this.permits = grant.permits;
    this.slot = grant.slot;
  }

  async extend(options: { ttlMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<Extension> {
    return (await this.extendBy(options.ttlMs, options.signal)) as Extension;
  }
}

/** A set of names granted together (Client.acquireMany), under one lease. */
export class LockSet extends Granted<MultiReleased> implements MultiGrant {
  readonly names: readonly string[];
  readonly lease: string;
  readonly fencingTokens: { readonly [name: string]: number };
  readonly modes: { readonly [name: string]: "shared" | "exclusive" };
  readonly validityMs: number;
  readonly ttlMs: number;

  constructor(grant: MultiGrant, sentAt: number, ops: GrantOps<MultiReleased>) {
    super(ops, sentAt, grant.validityMs);
    this.names = grant.names;
    this.lease = grant.lease;
    this.fencingTokens = grant.fencingTokens;
    this.modes = grant.modes;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
  }

  /** Extends every name of the set (a PATCH each, at once); throws if any fails. */
  async extend(options: { ttlMs?: number | undefined; signal?: AbortSignal | undefined } = {}): Promise<readonly Extension[]> {
    return (await this.extendBy(options.ttlMs, options.signal)) as readonly Extension[];
  }
}

/**
 * A lock kept while you work (Client.hold, Client.using): the grant, and a belief that ends
 * by a local timer.  `signal` aborts when it is lost; `release()` (or `await using`) lets it
 * go.
 */
export interface HeldLock extends Grant, Held {}

/** A permit of a semaphore kept while you work (Client.holdSemaphore, usingSemaphore). */
export interface HeldPermit extends PermitGrant, Held {}

/** A set of names kept while you work (Client.holdMany, usingMany), by extensions. */
export interface HeldLockSet extends MultiGrant, Held {}

export class KeptLock extends Kept implements HeldLock {
  readonly name: string;
  readonly lease: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
  readonly shared: boolean;
  readonly holds: number;

  constructor(grant: Grant, deadline: number, confirm: boolean, keeper: Keeper, keepalive: Held["keepalive"], timeoutMs: number) {
    super(`the lock on "${grant.name}"`, deadline, confirm, keeper, keepalive, timeoutMs, lossMarginMs(grant.ttlMs));
    this.name = grant.name;
    this.lease = grant.lease;
    this.fencingToken = grant.fencingToken;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
    this.shared = grant.shared;
    this.holds = grant.holds;
  }
}

export class KeptPermit extends Kept implements HeldPermit {
  readonly name: string;
  readonly lease: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
  readonly shared = false;
  readonly holds = 1;
  readonly permits: number;
  readonly slot: number;

  constructor(grant: PermitGrant, deadline: number, confirm: boolean, keeper: Keeper, keepalive: Held["keepalive"], timeoutMs: number) {
    super(`the permit of "${grant.name}"`, deadline, confirm, keeper, keepalive, timeoutMs, lossMarginMs(grant.ttlMs));
    this.name = grant.name;
    this.lease = grant.lease;
    this.fencingToken = grant.fencingToken;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
    this.permits = grant.permits;
    this.slot = grant.slot;
  }
}

export class KeptSet extends Kept implements HeldLockSet {
  readonly names: readonly string[];
  readonly lease: string;
  readonly fencingTokens: { readonly [name: string]: number };
  readonly modes: { readonly [name: string]: "shared" | "exclusive" };
  readonly validityMs: number;
  readonly ttlMs: number;

  constructor(grant: MultiGrant, deadline: number, confirm: boolean, keeper: Keeper, timeoutMs: number) {
    super(`the locks on ${grant.names.map((n) => `"${n}"`).join(", ")}`, deadline, confirm, keeper, "extend", timeoutMs, lossMarginMs(grant.ttlMs));
    this.names = grant.names;
    this.lease = grant.lease;
    this.fencingTokens = grant.fencingTokens;
    this.modes = grant.modes;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
  }
}
