// Package redlock is a client of redlockd, the distributed-lock service: named locks
// granted by a quorum of independent Redis masters, each grant with a fencing token.
// Standard library only.
//
//	c, err := redlock.New("http://127.0.0.1:8080", redlock.WithToken(token))
//	lock, err := c.Lock(ctx, "reports", &redlock.LockOptions{TTL: 10 * time.Second})
//	if err != nil { ... }              // errors.Is(err, redlock.ErrLockHeld), ...
//	defer lock.Unlock(context.Background())
//	work(lock.Context(), lock.FencingToken()) // Context() ends if the lock is lost
//
// Lock keeps the lock until Unlock, by a streamed hold (the service extends it for as
// long as the request is open, and releases it if this process goes away) or by
// extensions from this process, and cancels Context() as soon as it is lost.  The
// plain calls Acquire, Extend, Release and Status map one to one onto the HTTP API.
// LockOptions.Shared takes a read hold; Semaphore holds one of a semaphore's permits as
// Lock holds a lock (AcquirePermit, ExtendPermit, ReleasePermit and SemaphoreStatus are
// its plain calls).
//
// Every error answer of the service is an *Error whose code is one of the ErrorCode
// constants, so errors.Is(err, redlock.ErrLockHeld) tests it and errors.As reaches its
// fields (RetryAfter, NodesOK, Quorum, Permits).  A lost lock's Err is a *LostError matching
// ErrLockLost.
package redlock
