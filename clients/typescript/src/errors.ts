// errors.ts -- the service's error codes (api/openapi.yaml, components.schemas.Error) and
// the exceptions this client throws for them.  Clients act on `code`, never on `message`.

/** Every `error` code the service answers, as api/openapi.yaml lists them (a test checks). */
export const ERROR_CODES = [
  "invalid_json",
  "invalid_name",
  "invalid_ttl",
  "invalid_wait",
  "invalid_lease",
  "invalid_hold",
  "invalid_index",
  "invalid_owner",
  "invalid_limit",
  "invalid_force",
  "invalid_mode",
  "invalid_permits",
  "invalid_reentrant",
  "invalid_query",
  "invalid_lock_delay",
  "invalid_max_hold",
  "invalid_token",
  "unauthorized",
  "forbidden",
  "not_found",
  "lease_not_found",
  "method_not_allowed",
  "lock_held",
  "lock_contended",
  "permits_mismatch",
  "max_hold_exceeded",
  "body_too_large",
  "client_closed",
  "internal",
  "quorum_unavailable",
  "masters_quarantined",
  "validity_exhausted",
  "too_many_waiters",
  "too_many_streams",
  "shutting_down",
  "release_unconfirmed",
] as const;

/** A code the service sends in an error body. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * A code of this client's own, for what no answer of the service says:
 * - `timeout`: no answer within the client's time limit (the request was abandoned);
 * - `connection_failed`: the connection could not be made or broke before an answer;
 * - `bad_response`: an answer that is not what the API document describes;
 * - `lock_lost`: a held lock stopped being held (see LeaseLostError.reason).
 */
export type ClientErrorCode = "timeout" | "connection_failed" | "bad_response" | "lock_lost";

/** Why a kept lock (Client.hold, using, holdSemaphore, holdMany, an election) stopped being held. */
export type LossReason =
  /** The service could not extend it on a quorum of masters (the stream's `lost` line). */
  | "no_quorum"
  /** The service found the masters no longer holding the lease. */
  | "lease_lost"
  /** Released by a DELETE with its lease from somewhere else, or broken by an admin (force). */
  | "released"
  /** The service is shutting down and released it. */
  | "shutting_down"
  /** The validity last confirmed (counted from a send) ran out with no renewal in time. */
  | "expired"
  /** The stream ended or broke without saying why. */
  | "disconnected"
  /** The service heard no ping for a whole ttl (this process was stopped or stalled) and released it. */
  | "client_silent"
  /** The stream carried something the other side did not expect. */
  | "bad_message";

/** What the service's error body carried, beside `error` and `message`. */
export type ErrorBody = { readonly [member: string]: unknown };

/** Base class of every error this client throws (except the caller's own abort reasons). */
export class RedlockError extends Error {
  /** The service's `error` code, or one of the client's own. */
  readonly code: ErrorCode | ClientErrorCode;
  /** The HTTP status of the answer, if there was one. */
  readonly status: number | undefined;
  /** The answer's X-Request-Id (the service logs it), if there was one. */
  readonly requestId: string | undefined;
  /** The whole error body, if there was one. */
  readonly body: ErrorBody | undefined;

  constructor(
    code: ErrorCode | ClientErrorCode,
    message: string,
    init: { status?: number; requestId?: string | null; body?: ErrorBody; cause?: unknown } = {},
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = init.status;
    this.requestId = init.requestId ?? undefined;
    this.body = init.body;
  }
}

/** 409 `lock_held` (another lease holds it) or `lock_contended` (votes kept splitting). */
export class LockHeldError extends RedlockError {
  /** When to try again, in ms (when the holder's lock should expire). */
  readonly retryAfterMs: number;

  constructor(
    code: ErrorCode,
    message: string,
    retryAfterMs: number,
    init: { status?: number; requestId?: string | null; body?: ErrorBody } = {},
  ) {
    super(code, message, init);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * 409 `permits_mismatch`: the semaphore is in use with another number of permits (`permits`,
 * the one in use).  Not a LockHeldError: waiting does not help while its holders use the other.
 */
export class PermitsMismatchError extends RedlockError {
  /** The number of permits the semaphore is in use with. */
  readonly permits: number;

  constructor(
    message: string,
    permits: number,
    init: { status?: number; requestId?: string | null; body?: ErrorBody } = {},
  ) {
    super("permits_mismatch", message, init);
    this.permits = permits;
  }
}

/**
 * 503 `quorum_unavailable` or `validity_exhausted`: no quorum of masters granted in time;
 * and its two kinds below (`masters_quarantined`, `release_unconfirmed`).
 */
export class QuorumUnavailableError extends RedlockError {
  /** Masters that answered in time (NaN when the body did not say). */
  readonly nodesOk: number;
  /** Masters needed (NaN when the body did not say). */
  readonly quorum: number;

  constructor(
    code: ErrorCode,
    message: string,
    init: { status?: number; requestId?: string | null; body?: ErrorBody } = {},
  ) {
    super(code, message, init);
    this.nodesOk = typeof init.body?.["nodes_ok"] === "number" ? init.body["nodes_ok"] : NaN;
    this.quorum = typeof init.body?.["quorum"] === "number" ? init.body["quorum"] : NaN;
  }
}

/**
 * 503 `masters_quarantined`: fewer than a quorum of masters are trusted; the others sit out
 * a restart, a loss of data or a clock that misbehaved.  An acquire is tried again (the
 * retry settings); `rejoinMs` says when the first is due back.
 */
export class MastersQuarantinedError extends QuorumUnavailableError {
  /** Masters sitting out. */
  readonly quarantined: number;
  /** When the first of them is due back, in ms; null when each waits for its peers. */
  readonly rejoinMs: number | null;

  constructor(message: string, init: { status?: number; requestId?: string | null; body?: ErrorBody } = {}) {
    super("masters_quarantined", message, init);
    this.quarantined = typeof init.body?.["quarantined"] === "number" ? init.body["quarantined"] : NaN;
    this.rejoinMs = typeof init.body?.["rejoin_ms"] === "number" ? init.body["rejoin_ms"] : null;
  }
}

/**
 * 503 `release_unconfirmed` (a release, DELETE): the masters that did not answer may still
 * hold the lock for this lease, so the service cannot say it is free; it finishes the
 * release by itself (retried until each master answers or the ttl is over).  Stop using
 * the resource as after any release; do not count on the lock being free for others before
 * its ttl ends.  A plain lock may be released again later (200 or 404 tells); a reentrant
 * one must not (each release takes a hold back): status(name, { lease }) shows the holds a
 * quorum still counts.  Never sent again by this client.
 */
export class ReleaseUnconfirmedError extends QuorumUnavailableError {
  constructor(message: string, init: { status?: number; requestId?: string | null; body?: ErrorBody } = {}) {
    super("release_unconfirmed", message, init);
  }
}

/**
 * The lease is gone: 404 `lease_not_found` on an extend or release, or (code `lock_lost`)
 * a held lock was lost; then `reason` says how.
 */
export class LeaseLostError extends RedlockError {
  readonly reason: LossReason | undefined;

  constructor(
    code: "lease_not_found" | "lock_lost",
    message: string,
    init: { status?: number; requestId?: string | null; body?: ErrorBody; reason?: LossReason; cause?: unknown } = {},
  ) {
    super(code, message, init);
    this.reason = init.reason;
  }
}

/** 401 `unauthorized` (no token, or one the service does not know) or 403 `forbidden`. */
export class UnauthorizedError extends RedlockError {}

/** Whether `code` is one the service sends (it is in ERROR_CODES). */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && (ERROR_CODES as readonly string[]).includes(code);
}

/**
 * The error for an answer that is not a success: the status, the parsed body (or undefined
 * when it was not a JSON object), and the headers.
 */
export function errorFromAnswer(status: number, body: unknown, header: (name: string) => string | null): RedlockError {
  const requestId = header("x-request-id");
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return new RedlockError("bad_response", `HTTP ${status} without a JSON error body`, { status, requestId });
  }
  const b = body as ErrorBody;
  const message = typeof b["message"] === "string" ? b["message"] : `HTTP ${status}`;
  const code = b["error"];
  if (!isErrorCode(code)) {
    return new RedlockError("bad_response", `HTTP ${status} with an unknown error code ${JSON.stringify(code)}: ${message}`, {
      status,
      requestId,
      body: b,
    });
  }
  const init = { status, requestId, body: b };
  switch (code) {
    case "lock_held":
    case "lock_contended": {
      let retryAfterMs = typeof b["retry_after_ms"] === "number" ? b["retry_after_ms"] : NaN;
      if (!Number.isFinite(retryAfterMs)) {
        const seconds = Number(header("retry-after"));
        retryAfterMs = Number.isFinite(seconds) ? seconds * 1000 : 0;
      }
      return new LockHeldError(code, message, retryAfterMs, init);
    }
    case "permits_mismatch":
      return new PermitsMismatchError(message, typeof b["permits"] === "number" ? b["permits"] : NaN, init);
    case "quorum_unavailable":
    case "validity_exhausted":
      return new QuorumUnavailableError(code, message, init);
    case "masters_quarantined":
      return new MastersQuarantinedError(message, init);
    case "release_unconfirmed":
      return new ReleaseUnconfirmedError(message, init);
    case "lease_not_found":
      return new LeaseLostError(code, message, init);
    case "unauthorized":
    case "forbidden":
      return new UnauthorizedError(code, message, init);
    default:
      return new RedlockError(code, message, init);
  }
}
