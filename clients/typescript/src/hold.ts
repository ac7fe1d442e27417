// hold.ts -- a lock held while connected (POST ... hold=stream): reads the service's lines,
// tracks the validity they announce, and aborts the lock's signal the moment it is lost.
// A permit of a semaphore is held the same way, its lines made by extending it (PATCH).

import { LeaseLostError, type LossReason } from "./errors.js";
import { type Extension, type Grant, type Lines, type PermitGrant, parseHoldEvent } from "./wire.js";

/**
 * A lock the service keeps for as long as this connection stays open (it extends the lease
 * about every third of the ttl and says so on the stream).  `signal` aborts when the lock
 * is lost; `release()` lets it go.
 */
export interface HeldLock extends Grant {
  /**
   * Aborts when the lock is lost (its reason a LeaseLostError, `reason` saying how) or when
   * the caller's own `signal` aborted the hold (its reason the caller's).  Not aborted by
   * this lock's own `release()`.
   */
  readonly signal: AbortSignal;
  /** True from the grant until the lock is lost or released. */
  readonly held: boolean;
  /**
   * How much longer, in ms, you may assume you hold the lock: from the validity the service
   * last announced, counted from when its line was received (0 once not held).
   */
  readonly remainingMs: number;
  /** How many extensions the service has announced so far. */
  readonly extensions: number;
  /**
   * Releases the lock: a DELETE with the lease, then the connection is closed (which
   * releases it on the service's side too).  Never throws; resolves to true if the service
   * confirmed the release, false if the lock was no longer held or the DELETE failed (then
   * only the closed connection lets it go).  Calling it again returns the first answer.
   */
  release(): Promise<boolean>;
}

type State = "held" | "releasing" | "released" | "lost";

const LOSS_TEXT: Record<LossReason, string> = {
  no_quorum: "the service could not extend it on a quorum of masters",
  lease_lost: "the masters no longer hold its lease",
  released: "it was released elsewhere (a DELETE with its lease, or broken by an admin)",
  shutting_down: "the service shut down and released it",
  expired: "the validity last announced ran out with no word from the service",
  disconnected: "the stream from the service ended",
};

/** The implementation of HeldLock (Client.hold builds it once the grant line is read). */
export class StreamHold implements HeldLock {
  readonly name: string;
  readonly lease: string;
  readonly fencingToken: number;
  readonly validityMs: number;
  readonly ttlMs: number;
  readonly shared: boolean;

  private readonly loss = new AbortController();
  private state: State = "held";
  private validUntil: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private releasing: Promise<boolean> | undefined;
  private extended = 0;
  private readonly detachCaller: () => void;

  /**
   * @param grant      the stream's first line
   * @param receivedAt performance.now() when that line was received
   * @param reader     the rest of the stream (or the lines of ExtensionLines)
   * @param connection aborting it closes the connection (the service then releases)
   * @param del        DELETE with the lease: true once released, throws otherwise
   * @param caller     the caller's signal: its abort releases the lock
   */
  constructor(
    grant: Grant,
    receivedAt: number,
    private readonly reader: Lines,
    private readonly connection: AbortController,
    private readonly del: () => Promise<unknown>,
    caller: AbortSignal | undefined,
  ) {
    this.name = grant.name;
    this.lease = grant.lease;
    this.fencingToken = grant.fencingToken;
    this.validityMs = grant.validityMs;
    this.ttlMs = grant.ttlMs;
    this.shared = grant.shared;
    this.validUntil = receivedAt + grant.validityMs;
    this.arm();
    if (caller === undefined) {
      this.detachCaller = () => {};
    } else {
      const onAbort = () => this.end(caller.reason);
      caller.addEventListener("abort", onAbort, { once: true });
      this.detachCaller = () => caller.removeEventListener("abort", onAbort);
      if (caller.aborted) onAbort();
    }
    void this.pump();
  }

  get signal(): AbortSignal {
    return this.loss.signal;
  }

  get held(): boolean {
    return this.state === "held";
  }

  get remainingMs(): number {
    return this.state === "held" ? Math.max(0, this.validUntil - performance.now()) : 0;
  }

  get extensions(): number {
    return this.extended;
  }

  release(): Promise<boolean> {
    if (this.releasing === undefined) {
      if (this.state !== "held") {
        this.releasing = Promise.resolve(false);
      } else {
        this.state = "releasing";
        this.stop();
        this.releasing = this.del().then(
          () => true,
          () => false,
        ).finally(() => {
          this.connection.abort();
          this.state = "released";
        });
      }
    }
    return this.releasing;
  }

  /** The caller's signal aborted: let the lock go, and abort ours with the caller's reason. */
  private end(reason: unknown): void {
    if (this.state !== "held") return;
    void this.release();
    this.loss.abort(reason);
  }

  private lose(reason: LossReason, cause?: unknown): void {
    if (this.state !== "held") return;
    this.state = "lost";
    this.stop();
    // Closing the connection makes the service let go of whatever it still holds.
    this.connection.abort();
    this.loss.abort(
      new LeaseLostError("lock_lost", `lost the lock on "${this.name}": ${LOSS_TEXT[reason]}`, {
        reason,
        ...(cause === undefined ? {} : { cause }),
      }),
    );
  }

  private stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.detachCaller();
  }

  /** The validity's deadline: past it with no new line, the lock is lost. */
  private arm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      // A timer may fire a little early or late; only the clock decides.
      if (performance.now() >= this.validUntil) this.lose("expired");
      else this.arm();
    }, Math.max(0, this.validUntil - performance.now()));
    // The open connection keeps the process alive while the lock is held; the timer alone must not.
    this.timer.unref?.();
  }

  private async pump(): Promise<void> {
    try {
      for (;;) {
        const line = await this.reader.next();
        const now = performance.now();
        if (this.state !== "held") return;
        if (line === null) return this.lose("disconnected");
        const ev = parseHoldEvent(JSON.parse(line));
        switch (ev.event) {
          case "extended":
            this.validUntil = now + ev.validityMs;
            this.extended++;
            this.arm();
            break;
          case "lost":
            return this.lose(ev.reason);
          case "released":
            return this.lose(ev.reason ?? "released");
        }
      }
    } catch (e) {
      this.lose("disconnected", e);
    }
  }
}

/** A permit of a semaphore held until released (Client.holdSemaphore): a HeldLock with its slot. */
export interface HeldPermit extends HeldLock {
  /** The semaphore's number of permits. */
  readonly permits: number;
  /** This permit's slot, 0..permits-1 (its fencing token is T*1024+slot). */
  readonly slot: number;
}

/** The implementation of HeldPermit: a StreamHold fed by ExtensionLines. */
export class PermitHold extends StreamHold implements HeldPermit {
  readonly permits: number;
  readonly slot: number;

  constructor(
    grant: PermitGrant,
    sentAt: number,
    reader: Lines,
    connection: AbortController,
    del: () => Promise<unknown>,
    caller: AbortSignal | undefined,
  ) {
    super(grant, sentAt, reader, connection, del, caller);
    this.permits = grant.permits;
    this.slot = grant.slot;
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, Math.max(0, ms));
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * The lines a streamed hold would have, made here: an extension (PATCH) a third of the ttl
 * after the last successful one was sent, again every tenth of the ttl (20 ms..1 s) after a
 * failure, each success an `extended` line whose validity counts from when its PATCH was sent.
 * A lease found gone is a `lost` line (lease_lost); failures alone leave the hold's own timer
 * to call it expired.  Ends (null) when `stop` aborts.
 */
export class ExtensionLines implements Lines {
  private lastSent: number;

  constructor(
    private readonly ttlMs: number,
    sentAt: number,
    private readonly extend: (signal: AbortSignal) => Promise<Extension>,
    private readonly stop: AbortSignal,
  ) {
    this.lastSent = sentAt;
  }

  async next(): Promise<string | null> {
    let wait = this.ttlMs / 3 - (performance.now() - this.lastSent);
    for (;;) {
      await pause(wait, this.stop);
      if (this.stop.aborted) return null;
      const sent = performance.now();
      try {
        const x = await this.extend(this.stop);
        this.lastSent = sent;
        const left = Math.floor(x.validityMs - (performance.now() - sent));
        return JSON.stringify({ event: "extended", validity_ms: Math.max(1, left) });
      } catch (e) {
        if (this.stop.aborted) return null;
        if (e instanceof LeaseLostError) return JSON.stringify({ event: "lost", reason: "lease_lost" });
        wait = Math.min(Math.max(this.ttlMs / 10, 20), 1000);
      }
    }
  }
}
