// index.ts -- @redlockd/client: a dependency-free client of redlockd for Node 18+.

import "./dispose.js";

export {
  Client,
  DEFAULT_URL,
  newLease,
  type AcquireOptions,
  type ClientOptions,
  type ExtendOptions,
  type HoldOptions,
  type ListOptions,
  type PermitHoldOptions,
  type PermitOptions,
  type RequestOptions,
  type RetrySettings,
  type SetOptions,
  type StatusOptions,
  type UsingPermitRoutine,
  type UsingRoutine,
  type UsingSetRoutine,
  type WatchOptions,
} from "./client.js";
export { Election, type ElectionClient, type ElectionOptions, type Leader } from "./election.js";
export {
  ERROR_CODES,
  LeaseLostError,
  LockHeldError,
  MastersQuarantinedError,
  PermitsMismatchError,
  QuorumUnavailableError,
  ReleaseUnconfirmedError,
  RedlockError,
  UnauthorizedError,
  isErrorCode,
  type ClientErrorCode,
  type ErrorBody,
  type ErrorCode,
  type LossReason,
} from "./errors.js";
export { lossMarginMs, type Held } from "./hold.js";
export type { TlsOptions } from "./http.js";
export { Lock, LockSet, Permit, type HeldLock, type HeldLockSet, type HeldPermit } from "./locks.js";
export type {
  Extension,
  Grant,
  Health,
  ListedLock,
  LockList,
  LockState,
  MasterHealth,
  MultiGrant,
  MultiReleased,
  PermitGrant,
  Released,
  SemaphoreState,
} from "./wire.js";
