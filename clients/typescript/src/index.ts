// index.ts -- @redlockd/client: a dependency-free client of redlockd for Node 18+.

export {
  Client,
  newLease,
  type AcquireOptions,
  type ClientOptions,
  type ExtendOptions,
  type HoldOptions,
  type ListOptions,
  type PermitOptions,
  type RequestOptions,
  type StatusOptions,
  type UsingPermitRoutine,
  type UsingRoutine,
} from "./client.js";
export {
  ERROR_CODES,
  LeaseLostError,
  LockHeldError,
  PermitsMismatchError,
  QuorumUnavailableError,
  RedlockError,
  UnauthorizedError,
  isErrorCode,
  type ClientErrorCode,
  type ErrorBody,
  type ErrorCode,
  type LossReason,
} from "./errors.js";
export type { HeldLock, HeldPermit } from "./hold.js";
export type { Extension, Grant, ListedLock, LockList, LockState, PermitGrant, SemaphoreState } from "./wire.js";
