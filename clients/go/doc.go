// Package redlock is a client of redlockd, the distributed-lock service: named locks
// granted by a quorum of independent Redis masters, each grant with a fencing token.
// Standard library only.
//
//	c, err := redlock.New("")          // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
//	lock, err := c.Lock(ctx, "reports", &redlock.LockOptions{TTL: 10 * time.Second})
//	if err != nil { ... }              // errors.Is(err, redlock.ErrLockHeld), ...
//	defer lock.Unlock(context.Background())
//	work(lock.Context(), lock.FencingToken()) // Context() ends if the lock is lost
//
// Lock keeps the lock until Unlock, by a duplex streamed hold (the service extends it
// while this process pings it, and lets go about one ttl after this process stops) or by
// extensions from this process, and cancels Context() before the validity last proven
// ends.  Every validity is counted from the send of the request (or ping)
// whose round proved it, and the loss is signalled by a timer of its own: no read,
// write or DNS lookup can delay it, whatever the network does.  Semaphore holds a permit
// the same way, LockSet a set of locks taken together, and Election leads an election
// (Campaign, Resign, Leader, Observe, as etcd's concurrency.Election).
//
// The plain calls map one to one onto the HTTP API: Acquire, Extend, Release,
// ReleaseHold, ForceRelease, Status, HoldCount, Watch, List; AcquireSet, ReleaseSet;
// AcquirePermit, ExtendPermit, ReleasePermit, SemaphoreStatus; Health, Ready, Metrics.
// Each has a deadline for all of it (connect, send, receive): the caller's ctx, and
// the client's timeout beyond what the call asks the service to wait (WithTimeout).
//
// Every error answer of the service is an *Error whose code is one of the ErrorCode
// constants, so errors.Is(err, redlock.ErrLockHeld) tests it and errors.As reaches its
// fields (RetryAfter, NodesOK, Quorum, Permits).  A lost lock's Err is a *LostError
// matching ErrLockLost.
package redlock
