// hold.ts -- a lock kept while you work: what this process believes about it, and what
// keeps it.
//
// The belief (class Kept) is one deadline on this process's monotonic clock and one timer
// at it.  Every validity is counted from a moment known to precede the round that made it:
// the send of the acquire (a grant), of the PATCH (an extension), of the ping (a duplex
// hold's `alive`) -- never from an answer's arrival, which can be late by any amount.  The
// deadline only moves to the later of its end and the new one; when the timer fires, the
// lock is lost ("expired"), whatever the network is doing: no read, write or lookup runs
// on that path (docs/DESIGN.md section 8, "The rule for clients").
//
// What keeps it (a Keeper): a duplex stream (pings, one in flight, each `alive` answer
// counted from its ping's send: DESIGN section 10), or extensions (a PATCH every third of
// the ttl, each call bounded by the lock's own deadline), or a one-way stream (a service
// without duplex holds: its lines say only `lost`/`released`, the validity is kept by
// extensions as above).

import type { Duplex, Readable } from "node:stream";

import { asyncDispose } from "./dispose.js";
import { LeaseLostError, type LossReason, RedlockError } from "./errors.js";

/** A lock (or permit, or set) kept while you work; see HeldLock. */
export interface Held extends AsyncDisposable {
  /**
   * Aborts when the lock is lost (its reason a LeaseLostError whose `reason` says how) or
   * when the caller's own `signal` aborted the hold (its reason the caller's).  Not aborted
   * by this hold's own `release()`.
   */
  readonly signal: AbortSignal;
  /** True from the grant until the lock is lost or released (or release() was called). */
  readonly held: boolean;
  /**
   * How much longer, in ms, you may assume you hold it: the latest validity the service
   * gave, counted from this process's send of the request (or ping) it answered, less the
   * loss margin (lossMarginMs).  0 once not held.
   */
  readonly remainingMs: number;
  /** How many times the validity was renewed (answered pings, or extensions). */
  readonly extensions: number;
  /** How it is kept: "stream" (a duplex stream), "extend" (PATCH), "one-way" (an old service's stream, and PATCH). */
  readonly keepalive: "stream" | "extend" | "one-way";
  /**
   * Lets it go: `{"release":true}` on a duplex stream, else a DELETE with the lease, then
   * the connection is closed.  Never throws; resolves to true when the service confirmed
   * the release, false when the lock was no longer held or the answer did not come within
   * the client's timeout (the service then lets it go by itself: at the end of the
   * validity it last told, or the ttl).  This process stops counting on the lock at the
   * call.  A second call returns the first one's answer.
   */
  release(): Promise<boolean>;
  /** `await using lock = await client.hold(...)`: release() at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>;
}

const LOSS_TEXT: Record<LossReason, string> = {
  no_quorum: "the service could not extend it on a quorum of masters",
  lease_lost: "the masters no longer hold its lease (expired, or broken with force)",
  released: "it was released elsewhere (a DELETE with its lease)",
  shutting_down: "the service instance is shutting down",
  expired: "the validity last confirmed ran out with no renewal in time",
  disconnected: "the connection to the service ended",
  client_silent: "the service heard no ping for a whole ttl and released it",
  bad_message: "the service and this client misunderstood each other on the stream",
};

/**
 * How long before the end of its validity a kept lock is called lost when no renewal came:
 * a tenth of the ttl, 10 ms..1 s (the margin the service's own streamed hold keeps before
 * it says `lost`, and the Go and Python clients'), so that code watching the signal has
 * that long to stop, and a timer that fires late on a busy machine still fires in time.
 */
export function lossMarginMs(ttlMs: number): number {
  return Math.min(Math.max(ttlMs / 10, 10), 1000);
}

/** What keeps a hold: pings or extensions.  Kept calls these. */
export interface Keeper {
  /** Starts keeping `hold` (its grant has been taken). */
  start(hold: Kept): void;
  /** Stops renewing (the lock was lost, or is being released). */
  stop(): void;
  /** Lets the lock go, within `limitMs`; true when the service confirmed it. */
  letGo(limitMs: number): Promise<boolean>;
}

type State = "confirming" | "held" | "releasing" | "released" | "lost";

/** The belief about one kept lock (or permit, or set); subclasses add the grant's fields. */
export class Kept implements Held {
  readonly keepalive: "stream" | "extend" | "one-way";
  private readonly loss = new AbortController();
  private state: State;
  private deadline: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private releasing: Promise<boolean> | undefined;
  private renewals = 0;
  private callerReason: unknown;
  private detachCaller: () => void = () => {};
  private confirmWaiter: { resolve: () => void; reject: (e: unknown) => void; timer: ReturnType<typeof setTimeout> } | undefined;

  /**
   * @param what      "lock \"x\"", for messages
   * @param deadline  the grant's validity end (its request's send + validity_ms); the
   *                  belief ends `marginMs` before each such end
   * @param confirm   true: that end is no use (the acquire waited): the first renewal
   *                  confirms the grant (see confirmed())
   * @param keeper    what keeps it
   * @param timeoutMs the release's limit
   * @param marginMs  how long before a validity's end the loss is signalled (lossMarginMs)
   */
  constructor(
    private readonly what: string,
    deadline: number,
    confirm: boolean,
    private readonly keeper: Keeper,
    keepalive: "stream" | "extend" | "one-way",
    private readonly timeoutMs: number,
    private readonly marginMs: number,
  ) {
    this.keepalive = keepalive;
    this.deadline = deadline - marginMs;
    this.state = confirm ? "confirming" : "held";
  }

  /** Starts the keeper and the timer; the caller's signal aborting releases it. */
  begin(caller: AbortSignal | undefined): void {
    if (this.state === "held") this.arm();
    this.keeper.start(this);
    if (caller !== undefined) {
      const onAbort = () => this.end(caller.reason);
      caller.addEventListener("abort", onAbort, { once: true });
      this.detachCaller = () => caller.removeEventListener("abort", onAbort);
      if (caller.aborted) onAbort();
    }
  }

  get signal(): AbortSignal {
    return this.loss.signal;
  }

  get held(): boolean {
    return this.state === "held";
  }

  get remainingMs(): number {
    return this.state === "held" ? Math.max(0, this.deadline - performance.now()) : 0;
  }

  get extensions(): number {
    return this.renewals;
  }

  /** Where the belief ends, on performance.now()'s clock (not when not held). */
  get deadlineAt(): number {
    return this.deadline;
  }

  /** Whether the keeper should still renew (held, or confirming the grant). */
  get keeping(): boolean {
    return this.state === "held" || this.state === "confirming";
  }

  /**
   * A renewal: `validityMs` counted from `sentAt` (performance.now() at the send of the
   * request or ping it answers).  The belief runs to the later of that end and the one it
   * had.  Returns false when it came too late to count (the timer's moment has passed:
   * the lock is lost now if it was not already) or ends before now.
   */
  renewed(sentAt: number, validityMs: number): boolean {
    const now = performance.now();
    const end = sentAt + validityMs - this.marginMs;
    if (this.state === "confirming") {
      if (end <= now) return false;
      this.deadline = end;
      this.state = "held";
      this.renewals++;
      this.arm();
      const w = this.confirmWaiter;
      this.confirmWaiter = undefined;
      if (w !== undefined) {
        clearTimeout(w.timer);
        w.resolve();
      }
      return true;
    }
    if (this.state !== "held") return false;
    if (now >= this.deadline) {
      this.lose("expired");
      return false;
    }
    this.renewals++;
    if (end > this.deadline) {
      this.deadline = end;
      this.arm();
    }
    return end > now;
  }

  /**
   * For a grant that came after a wait (confirm): resolves once the first renewal has
   * given it a validity still running; rejects (RedlockError "timeout", or the loss) if
   * none does within `limitMs`.  Resolves at once for a hold that needs no confirmation.
   */
  confirmed(limitMs: number): Promise<void> {
    if (this.state === "held") return Promise.resolve();
    if (this.state !== "confirming") return Promise.reject(this.loss.signal.reason ?? new RedlockError("timeout", `${this.what}: not held`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.confirmWaiter = undefined;
        reject(new RedlockError("timeout", `${this.what}: granted after a wait, but no renewal confirmed it within ${Math.round(limitMs)} ms`));
      }, Math.max(0, limitMs));
      this.confirmWaiter = { resolve, reject, timer };
    });
  }

  /** The lock is lost: stop renewing, abort the signal. */
  lose(reason: LossReason, cause?: unknown): void {
    if (this.state !== "held" && this.state !== "confirming") return;
    const confirming = this.state === "confirming";
    this.state = "lost";
    this.stopTimer();
    this.detachCaller();
    this.keeper.stop();
    const e = new LeaseLostError("lock_lost", `lost ${this.what}: ${LOSS_TEXT[reason]}`, {
      reason,
      ...(cause === undefined ? {} : { cause }),
    });
    const w = this.confirmWaiter;
    this.confirmWaiter = undefined;
    if (w !== undefined) {
      clearTimeout(w.timer);
      w.reject(e);
    }
    if (!confirming) this.loss.abort(e);
  }

  release(): Promise<boolean> {
    if (this.releasing === undefined) {
      const was = this.state;
      if (was === "releasing" || was === "released") return Promise.resolve(false);
      this.state = "releasing";
      this.stopTimer();
      this.detachCaller();
      this.keeper.stop();
      const w = this.confirmWaiter;
      this.confirmWaiter = undefined;
      if (w !== undefined) {
        clearTimeout(w.timer);
        w.reject(this.callerReason ?? new RedlockError("timeout", `${this.what}: released before the grant was confirmed`));
      }
      this.releasing = this.keeper.letGo(this.timeoutMs).then(
        (ok) => ok && was !== "lost",
        () => false,
      );
      void this.releasing.then(() => {
        this.state = "released";
      });
    }
    return this.releasing;
  }

  async [asyncDispose](): Promise<void> {
    await this.release();
  }

  /** The caller's signal aborted: let the lock go, and abort ours with the caller's reason. */
  private end(reason: unknown): void {
    if (this.state !== "held" && this.state !== "confirming") return;
    this.callerReason = reason;
    void this.release();
    this.loss.abort(reason);
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The timer at the deadline: past it with no renewal, the lock is lost. */
  private arm(): void {
    this.stopTimer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // A timer may fire a little early; only the clock decides.
      if (performance.now() >= this.deadline) this.lose("expired");
      else this.arm();
    }, Math.max(0, this.deadline - performance.now()));
  }
}

/** Splits a byte stream into lines (without "\n" and a "\r" before it); skips empty ones. */
export class LineSplitter {
  private buffered = "";
  private readonly decoder = new TextDecoder();

  /** The complete lines in `chunk` (and what was buffered before it). */
  push(chunk: Uint8Array): string[] {
    this.buffered += this.decoder.decode(chunk, { stream: true });
    const out: string[] = [];
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl < 0) break;
      const line = this.buffered.slice(0, nl).replace(/\r$/, "").trim();
      this.buffered = this.buffered.slice(nl + 1);
      if (line !== "") out.push(line);
    }
    if (this.buffered.length > 65536) throw new RedlockError("bad_response", "a line of more than 64 KiB on the stream");
    return out;
  }
}

type Obj = { readonly [k: string]: unknown };

function parseLine(line: string): Obj | undefined {
  try {
    const v: unknown = JSON.parse(line);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined;
  } catch {
    return undefined;
  }
}

/** The loss a last line (`lost` or `released`) says. */
function lastLineReason(o: Obj): LossReason {
  const r = o["reason"];
  if (o["event"] === "released") {
    return r === "client_silent" ? "client_silent" : r === "shutting_down" ? "shutting_down" : "released";
  }
  switch (r) {
    case "no_quorum":
    case "shutting_down":
    case "bad_message":
      return r;
    default:
      return "lease_lost"; // lease_lost, or a reason this client does not know: a loss all the same
  }
}

/**
 * A duplex hold (DESIGN section 10): `{"ping":n}` right after the grant line and then every
 * `pingMs`, never while the answer to the last is unread; each `alive` n renews the belief
 * from ping n's send.  Any other line, the end of the stream or an error ends it.  Loss
 * stops the pings and leaves the connection open (unreferenced) until release(), which
 * sends `{"release":true}` and waits for the last line.
 */
export class DuplexKeeper implements Keeper {
  private hold: Kept | undefined;
  private n = 0;
  private pingSent = 0;
  private waiting = false;
  private stopped = false;
  private closed = false;
  private gone = false;
  private pingTimer: ReturnType<typeof setTimeout> | undefined;
  private onLast: ((o: Obj | undefined) => void) | undefined;

  /**
   * @param socket   the upgraded connection, past the grant line
   * @param splitter the splitter that read the grant line (it may hold more lines)
   * @param rest     lines already split after the grant line
   * @param pingMs   the grant line's ping_ms
   */
  constructor(
    private readonly socket: Duplex,
    private readonly splitter: LineSplitter,
    private readonly rest: string[],
    private readonly pingMs: number,
  ) {}

  start(hold: Kept): void {
    this.hold = hold;
    this.socket.on("data", (chunk: Buffer) => {
      let lines: string[];
      try {
        lines = this.splitter.push(chunk);
      } catch (e) {
        this.broken(e);
        return;
      }
      for (const l of lines) this.line(l);
    });
    this.socket.on("error", (e) => this.broken(e));
    this.socket.on("close", () => this.broken(undefined));
    this.socket.on("end", () => this.broken(undefined));
    this.socket.resume();
    this.ping(); // the first ping goes right after the grant line
    for (const l of this.rest.splice(0)) this.line(l);
  }

  private broken(e: unknown): void {
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
    }
    const w = this.onLast;
    this.onLast = undefined;
    if (w !== undefined) w(undefined);
    this.hold?.lose("disconnected", e);
  }

  private ping(): void {
    this.pingTimer = undefined;
    if (this.stopped || this.waiting || this.closed || this.hold === undefined || !this.hold.keeping) return;
    this.n++;
    this.waiting = true;
    this.pingSent = performance.now();
    this.socket.write(`{"ping":${this.n}}\n`);
  }

  private line(l: string): void {
    const o = parseLine(l);
    const hold = this.hold!;
    if (this.onLast !== undefined) {
      // Releasing: wait for the last line ("alive" answers may still come before it).
      if (o?.["event"] === "alive") return;
      const w = this.onLast;
      this.onLast = undefined;
      w(o);
      return;
    }
    if (o?.["event"] === "alive") {
      const v = o["validity_ms"];
      if (!this.waiting || o["ping"] !== this.n || typeof v !== "number" || !Number.isInteger(v)) {
        hold.lose("bad_message", new RedlockError("bad_response", `an answer to a ping not sent: ${l.slice(0, 200)}`));
        return;
      }
      this.waiting = false;
      hold.renewed(this.pingSent, v);
      if (!this.stopped) {
        const wait = Math.max(0, this.pingSent + this.pingMs - performance.now());
        this.pingTimer = setTimeout(() => this.ping(), wait);
        this.pingTimer.unref();
      }
      return;
    }
    if (o?.["event"] === "released") this.gone = true; // nothing is left to release
    if (o === undefined || (o["event"] !== "lost" && o["event"] !== "released")) {
      hold.lose("bad_message", new RedlockError("bad_response", `an unexpected line on the stream: ${l.slice(0, 200)}`));
      return;
    }
    hold.lose(lastLineReason(o));
  }

  stop(): void {
    this.stopped = true;
    if (this.pingTimer !== undefined) clearTimeout(this.pingTimer);
    this.pingTimer = undefined;
    // The connection stays open until release() (the service lets go when asked, or at
    // the validity it last told); it does not keep the process alive.
    (this.socket as { unref?: () => void }).unref?.();
  }

  letGo(limitMs: number): Promise<boolean> {
    if (this.closed || this.gone) {
      this.close();
      return Promise.resolve(false);
    }
    // Until the answer (or the limit), the connection keeps the process alive again.
    (this.socket as { ref?: () => void }).ref?.();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.onLast = undefined;
        this.close();
        resolve(false);
      }, limitMs);
      this.onLast = (o) => {
        clearTimeout(timer);
        this.close();
        resolve(o?.["event"] === "released");
      };
      this.socket.write('{"release":true}\n');
    });
  }

  private close(): void {
    this.closed = true;
    this.socket.destroy();
  }
}

/** An extension: resolves to the validity (ms) it gave, counted from its send. */
export type ExtendCall = (limitMs: number, signal: AbortSignal) => Promise<number>;
/** A release (DELETE): resolves to true when the service confirmed it. */
export type ReleaseCall = (limitMs: number) => Promise<boolean>;

/**
 * Extensions made here: a PATCH a third of the ttl after the last successful one was sent
 * (half the validity if that is shorter), again every tenth of the ttl (20 ms..1 s) after a
 * failure, each bounded by the lock's own deadline (an answer after it is of no use) and
 * counted from its send.  A lease found gone (404) is a loss ("lease_lost").
 */
export class ExtendKeeper implements Keeper {
  protected hold: Kept | undefined;
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inflight: AbortController | undefined;
  private readonly step: number;

  constructor(
    private readonly extend: ExtendCall,
    private readonly del: ReleaseCall,
    private readonly ttlMs: number,
    private lastSent: number,
    validityMs: number,
    private readonly timeoutMs: number,
  ) {
    this.step = Math.max(1, Math.min(ttlMs / 3, validityMs / 2));
  }

  start(hold: Kept): void {
    this.hold = hold;
    // A grant that must be confirmed (it came after a wait) is extended at once.
    this.schedule(hold.keeping && !hold.held ? 0 : this.lastSent + this.step - performance.now());
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, ms));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const hold = this.hold!;
    if (this.stopped || !hold.keeping) return;
    const sent = performance.now();
    // Bounded by the lock's own deadline (while confirming, by the client's timeout).
    const limit = hold.held ? Math.min(this.timeoutMs, hold.deadlineAt - sent) : this.timeoutMs;
    if (limit <= 0) return; // the lock's timer says it is lost
    const ac = new AbortController();
    this.inflight = ac;
    let validity: number;
    try {
      validity = await this.extend(limit, ac.signal);
    } catch (e) {
      this.inflight = undefined;
      if (this.stopped) return;
      if (e instanceof LeaseLostError) {
        hold.lose("lease_lost", e);
        return;
      }
      this.schedule(Math.min(Math.max(this.ttlMs / 10, 20), 1000));
      return;
    }
    this.inflight = undefined;
    if (this.stopped) return;
    if (hold.renewed(sent, validity)) {
      this.lastSent = sent;
      this.schedule(sent + this.step - performance.now());
    } else {
      // Its validity, counted from its send, is over already: try again soon.
      this.schedule(Math.min(Math.max(this.ttlMs / 10, 20), 1000));
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.inflight?.abort();
  }

  letGo(limitMs: number): Promise<boolean> {
    return this.del(limitMs);
  }
}

/**
 * A one-way stream (a service that answered 201 to a duplex request): kept by extensions
 * (ExtendKeeper), since an `extended` line's validity cannot be anchored; its `lost` and
 * `released` lines and its end are losses.  release(): a DELETE, then the stream closed.
 */
export class OneWayKeeper extends ExtendKeeper {
  constructor(
    private readonly body: Readable,
    private readonly splitter: LineSplitter,
    private readonly rest: string[],
    extend: ExtendCall,
    del: ReleaseCall,
    ttlMs: number,
    sentAt: number,
    validityMs: number,
    timeoutMs: number,
  ) {
    super(extend, del, ttlMs, sentAt, validityMs, timeoutMs);
  }

  override start(hold: Kept): void {
    super.start(hold);
    const line = (l: string) => {
      const o = parseLine(l);
      if (o?.["event"] === "lost" || o?.["event"] === "released") hold.lose(lastLineReason(o));
      // "extended" moves nothing: its validity cannot be counted from a send.
    };
    this.body.on("data", (chunk: Buffer) => {
      try {
        for (const l of this.splitter.push(chunk)) line(l);
      } catch (e) {
        hold.lose("disconnected", e);
      }
    });
    const ended = (e?: unknown) => hold.lose("disconnected", e);
    this.body.on("end", () => ended());
    this.body.on("close", () => ended());
    this.body.on("error", ended);
    this.body.resume();
    for (const l of this.rest.splice(0)) line(l);
  }

  override stop(): void {
    super.stop();
    (this.body as { socket?: { unref?: () => void } }).socket?.unref?.();
  }

  override async letGo(limitMs: number): Promise<boolean> {
    try {
      return await super.letGo(limitMs);
    } finally {
      this.body.destroy();
    }
  }
}
