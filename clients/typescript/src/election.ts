// election.ts -- leader election on a lock kept while connected, in the shape of etcd's
// concurrency.Election: campaign (resolves once elected), resign, leader, observe.  The
// leadership is a HeldLock: its `signal` aborts the moment this process can no longer be
// sure it leads (the same local timer as any kept lock), its fencing token is what the
// leader passes to what it writes.

import { LockHeldError, RedlockError } from "./errors.js";
import type { HeldLock } from "./locks.js";
import type { LockState } from "./wire.js";

/** What an election asks of its client (Client has it). */
export interface ElectionClient {
  hold(
    name: string,
    options: {
      ttlMs?: number | undefined;
      keepalive?: "stream" | "extend" | undefined;
      owner?: string | undefined;
      waitMs?: number | undefined;
      retryCount?: number | undefined;
      signal?: AbortSignal | undefined;
    },
  ): Promise<HeldLock>;
  status(name: string, options: { signal?: AbortSignal | undefined }): Promise<LockState>;
  watch(name: string, options: { signal?: AbortSignal | undefined; waitMs?: number | undefined }): AsyncGenerator<LockState, void, undefined>;
}

export interface ElectionOptions {
  /** The leadership lock's ttl in ms (default: the service's, 30000).  A leader that stops is replaced about a ttl later. */
  ttlMs?: number | undefined;
  /** How the leadership is kept (HoldOptions.keepalive; default "stream"). */
  keepalive?: "stream" | "extend" | undefined;
  /** How long each campaign request waits in the service's queue, in ms (default 30000). */
  campaignWaitMs?: number | undefined;
}

/** The leader as an observer sees it. */
export interface Leader {
  /** The value the leader campaigned with (its `owner`). */
  readonly value: string | null;
  /** Its leadership's fencing token (strictly larger for each later leader). */
  readonly fencingToken: number;
  /** How long a quorum still holds its lock, in ms (counted from the request that asked). */
  readonly validityMs: number;
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

const TRANSIENT = new Set([
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

/**
 * An election on the lock `name` (Client.election).
 *
 *     const election = client.election("scheduler", { ttlMs: 5000 });
 *     const leadership = await election.campaign("host-a", { signal });
 *     leadership.signal.addEventListener("abort", () => stopLeading());
 *     ...
 *     await election.resign();
 */
export class Election {
  readonly name: string;
  private current: HeldLock | undefined;
  private waitMs: number;

  constructor(
    private readonly client: ElectionClient,
    name: string,
    private readonly options: ElectionOptions = {},
  ) {
    this.name = name;
    this.waitMs = options.campaignWaitMs ?? 30000;
  }

  /** This process's leadership, while it holds it (undefined before, and once lost or resigned). */
  get leadership(): HeldLock | undefined {
    return this.current?.held === true ? this.current : undefined;
  }

  /**
   * Campaigns with `value` (shown to observers as the leader's value) until elected, and
   * resolves to the leadership: a HeldLock whose `signal` aborts when it is lost.  Waits in
   * the service's queue (a release hands the lock to the oldest waiter), and after a
   * failure that may pass (no quorum, no answer) tries again after a growing, jittered
   * pause (100 ms .. 5 s).  Rejects with `signal`'s reason when it aborts, or with an
   * error that will not pass (a 400, 401, 403).  Already leading: resolves to the
   * leadership it has.
   */
  async campaign(value?: string, options: { signal?: AbortSignal | undefined } = {}): Promise<HeldLock> {
    const signal = options.signal;
    if (this.leadership !== undefined) return this.leadership;
    let backoff = 0;
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const t0 = performance.now();
      try {
        const lock = await this.client.hold(this.name, {
          ttlMs: this.options.ttlMs,
          keepalive: this.options.keepalive,
          owner: value,
          waitMs: this.waitMs,
          retryCount: 0,
          signal,
        });
        this.current = lock;
        return lock;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof LockHeldError) {
          // Another leader all the time we waited: campaign again (after a pause if the
          // answer was quick: a contended round, or a wait the service cut short).
          backoff = 0;
          if (performance.now() - t0 < 1000) await sleep(100 + Math.random() * 200, signal);
          continue;
        }
        if (e instanceof RedlockError && e.code === "invalid_wait" && this.waitMs > 0) {
          // The service allows a shorter wait ("wait_ms must be an integer 0..N").
          const m = /0\.\.(\d+)/.exec(e.message);
          const max = m === null ? 0 : Number(m[1]);
          this.waitMs = max > 0 && max < this.waitMs ? max : Math.floor(this.waitMs / 2);
          continue;
        }
        if (!(e instanceof RedlockError) || !TRANSIENT.has(e.code)) throw e;
        backoff = Math.min(5000, Math.max(100, backoff * 2));
        await sleep(backoff / 2 + Math.random() * (backoff / 2), signal);
      }
    }
  }

  /**
   * Gives the leadership up (its lock released at once: the next campaigner in the
   * service's queue is elected).  Resolves to true if the service confirmed the release;
   * false if this process did not lead.
   */
  async resign(): Promise<boolean> {
    const l = this.current;
    this.current = undefined;
    return l === undefined ? false : l.release();
  }

  /** The current leader, or null when there is none (GET of the lock). */
  async leader(options: { signal?: AbortSignal | undefined } = {}): Promise<Leader | null> {
    const s = await this.client.status(this.name, options);
    return s.held ? { value: s.owner, fencingToken: s.fencingToken, validityMs: s.validityMs } : null;
  }

  /**
   * Yields the leader now, then each time it changes (null: none), until `signal` aborts
   * (the loop then throws its reason) or you break out.  A watch of the lock: the service
   * answers at each grant, release or expiry; nothing is polled.
   */
  async *observe(options: { signal?: AbortSignal | undefined; waitMs?: number | undefined } = {}): AsyncGenerator<Leader | null, void, undefined> {
    let last: string | undefined;
    for await (const s of this.client.watch(this.name, options)) {
      const l = s.held ? { value: s.owner, fencingToken: s.fencingToken, validityMs: s.validityMs } : null;
      const key = l === null ? "" : `${l.fencingToken} ${l.value ?? ""}`;
      if (key !== last) {
        last = key;
        yield l;
      }
    }
  }
}
