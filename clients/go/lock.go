// lock.go -- Lock: a lock (exclusive, shared or reentrant) held until Unlock, kept by a
// duplex streamed hold (duplex.go) or by extensions, whose Context is cancelled by a
// local timer before the validity last proven ends, whatever the network does; Permit: a
// permit of a semaphore held the same way.
//
// What the holder believes: each validity is counted from a moment known to precede the
// round that made it (the send of the acquire, of the PATCH, or of the ping an alive
// answer answers), the deadline is the latest such end, and Context() is cancelled a
// margin before it by a timer of its own (time.AfterFunc): no read, write or DNS lookup
// runs on that path, so none can delay it.

package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lock is a lock held until Unlock.  Its methods are safe for concurrent use.
type Lock struct {
	c         *Client
	t         target
	name      string
	lease     string
	token     int64
	ttl       time.Duration
	mode      KeepAlive
	holds     int
	reentrant bool // taken with LockOptions.Reentrant: never released by a fallback DELETE
	set       bool // a LockSet's: one name's loss is not the others', Unlock lets them go

	// extendFn extends what is held once (Extend); releaseFn releases it (the holds
	// left).  A set of locks has its own.
	extendFn  func(ctx context.Context) (time.Duration, error)
	releaseFn func(ctx context.Context) (int, error)

	ctx    context.Context // cancelled when the lock is lost or unlocked
	cancel context.CancelFunc
	done   chan struct{} // closed when the keeper has ended
	hold   *duplex       // Stream: the connection

	mu        sync.Mutex
	deadline  time.Time // the latest validity proven ends here
	err       error     // nil while held; *LostError or ErrUnlocked after
	lostAt    time.Time // when the loss was signalled (the tests' figure)
	lastErr   error     // the last failed extension's, for the "expired" loss
	lossTimer *time.Timer

	unlockOnce sync.Once
	unlockErr  error
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Lease is the secret that releases and extends the lock (never log it).
func (l *Lock) Lease() string { return l.lease }

// FencingToken is the grant's fencing token: give it to the resource the lock protects,
// which should refuse any token smaller than the largest it has seen.
func (l *Lock) FencingToken() int64 { return l.token }

// TTL is the lock's expiry on the masters, renewed by each extension.
func (l *Lock) TTL() time.Duration { return l.ttl }

// Holds is the reentrant hold count the grant answered (0 when not reentrant).
func (l *Lock) Holds() int { return l.holds }

// Context is cancelled as soon as the lock is lost (or unlocked): stop working on what
// it protects then.  It does not inherit the cancellation of the ctx given to Lock.
func (l *Lock) Context() context.Context { return l.ctx }

// Done is Context().Done(): closed when the lock is lost or unlocked.
func (l *Lock) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lock is held; then a *LostError (errors.Is(err, ErrLockLost))
// saying why it was lost, or ErrUnlocked.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Deadline is when the latest validity proven ends.  Context is cancelled a margin
// before it (a tenth of the ttl, 5 ms to 1 s) unless a later one was proven by then.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// margin is how long before the deadline an unextended lock is declared lost: to leave
// its user time to stop, and room for the timer itself to fire late (a process starved of
// CPU on a busy machine: 100 ms late was seen with a 25th).
func (l *Lock) margin() time.Duration {
	m := l.ttl / 10
	if m < 5*time.Millisecond {
		m = 5 * time.Millisecond
	}
	if m > time.Second {
		m = time.Second
	}
	return m
}

// prove records a validity proven by a round: held at least until t.  The deadline is
// the latest of them.
func (l *Lock) prove(t time.Time) {
	l.mu.Lock()
	if t.After(l.deadline) {
		l.deadline = t
	}
	l.lastErr = nil
	l.mu.Unlock()
}

func (l *Lock) setLastErr(err error) {
	l.mu.Lock()
	l.lastErr = err
	l.mu.Unlock()
}

// armLossTimer starts the timer that declares the lock lost a margin before its
// deadline.  It runs on its own (time.AfterFunc); when it fires early because the
// deadline moved on, it sets itself again.
func (l *Lock) armLossTimer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lossTimer = time.AfterFunc(time.Until(l.deadline.Add(-l.margin())), l.checkExpiry)
}

func (l *Lock) checkExpiry() {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.deadline.Add(-l.margin())); left > 0 {
		l.lossTimer.Reset(left)
		l.mu.Unlock()
		return
	}
	l.err = &LostError{Name: l.name, Reason: "expired", Err: l.lastErr}
	l.lostAt = time.Now()
	l.mu.Unlock()
	l.cancel()
}

// lose records why the lock was lost, unless it already ended, and cancels Context.
func (l *Lock) lose(reason string, err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = &LostError{Name: l.name, Reason: reason, Err: err}
		l.lostAt = time.Now()
	}
	l.mu.Unlock()
	l.cancel()
}

// newLock makes the Lock of grant g of t, proven until deadline.  Its keeper is started
// by the caller; the loss timer by armLossTimer.
func (c *Client) newLock(t target, g *Grant, mode KeepAlive, deadline time.Time, o *LockOptions) *Lock {
	l := &Lock{c: c, t: t, name: t.name, lease: g.Lease, token: g.FencingToken, ttl: g.TTL,
		mode: mode, holds: g.Holds, reentrant: o.Reentrant, deadline: deadline,
		done: make(chan struct{})}
	if l.ttl <= 0 {
		l.ttl = g.Validity
	}
	l.extendFn = func(ctx context.Context) (time.Duration, error) {
		e, err := c.extend(ctx, t, l.lease, l.ttl)
		if err != nil {
			return 0, err
		}
		return e.Validity, nil
	}
	l.releaseFn = func(ctx context.Context) (int, error) { return c.release(ctx, t, l.lease, "") }
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Lock acquires the lock name (waiting up to opts.Wait if it is held) and keeps it
// until Unlock: by a duplex streamed hold (opts.KeepAlive Stream, the default) or by
// extending it every third of its ttl (Extend).  The returned Lock's Context is
// cancelled as soon as the lock is lost.  Always call Unlock, also after a loss.
// opts.Shared takes a read hold, opts.Reentrant (with the holder's opts.Lease) one more
// hold of a lock this lease holds (either keep-alive).
//
// ctx and the client's timeout bound the acquire (beyond opts.Wait) only.  Errors are
// *Error for the service's answers (errors.Is(err, ErrLockHeld), ErrQuorumUnavailable,
// ErrUnauthorized...).
//
// With Extend, an attempt that gets no answer in time is retried with the same lease, as
// Acquire does.  With Stream it is not (a streamed hold lets go when its connection
// ends, which would undo the retry's grant): the error is returned, and a lease of the
// client's making is released by a DELETE in the background.
func (c *Client) Lock(ctx context.Context, name string, opts *LockOptions) (*Lock, error) {
	o := LockOptions{}
	if opts != nil {
		o = *opts
	}
	switch o.KeepAlive {
	case Stream:
		l, _, err := c.holdStream(ctx, lockTarget(name), &o)
		return l, err
	case Extend:
		l, _, err := c.lockExtend(ctx, lockTarget(name), &o)
		return l, err
	}
	return nil, fmt.Errorf("redlock: lock %s: unknown %v", name, o.KeepAlive)
}

// Permit is a permit of a semaphore held until Release: a Lock (Context, Err,
// FencingToken, Lease, Deadline...) with the permit's slot.
type Permit struct {
	*Lock
	permits, slot int
}

// Slot is the permit's slot, 0..Permits()-1; its FencingToken is T*1024+Slot.
func (p *Permit) Slot() int { return p.slot }

// Permits is the semaphore's number of permits.
func (p *Permit) Permits() int { return p.permits }

// Release gives the permit back and stops keeping it; as Lock.Unlock.
func (p *Permit) Release(ctx context.Context) error { return p.Unlock(ctx) }

// Semaphore takes one of the permits (1..1024) of the semaphore name, waiting up to
// opts.Wait for one, and keeps it until Release as Lock keeps a lock (opts.KeepAlive:
// a streamed hold, the default, or extensions).  Its Context is cancelled as soon as it
// is lost.  Errors as AcquirePermit's: ErrLockHeld when every permit is taken,
// ErrPermitsMismatch for another number.
func (c *Client) Semaphore(ctx context.Context, name string, permits int, opts *LockOptions) (*Permit, error) {
	o := LockOptions{}
	if opts != nil {
		o = *opts
	}
	var l *Lock
	var w *wireGrant
	var err error
	switch o.KeepAlive {
	case Stream:
		l, w, err = c.holdStream(ctx, semTarget(name, permits), &o)
	case Extend:
		l, w, err = c.lockExtend(ctx, semTarget(name, permits), &o)
	default:
		err = fmt.Errorf("redlock: semaphore %s: unknown %v", name, o.KeepAlive)
	}
	if err != nil {
		return nil, err
	}
	p, err := w.permit()
	if err != nil {
		l.Unlock(context.Background())
		return nil, fmt.Errorf("redlock: semaphore %s: %w", name, err)
	}
	return &Permit{Lock: l, permits: p.Permits, slot: p.Slot}, nil
}

// Unlock releases the lock and stops keeping it.  It answers nil once the service has
// released it (for a reentrant hold: given back one hold); the *LostError if it had been
// lost (errors.Is(err, ErrLockLost)); or the error of the release:
// errors.Is(err, ErrReleaseUnconfirmed) (or ErrQuorumUnavailable) when the masters that
// did not answer may still hold it: the lock is given up all the same (stop using the
// resource), the service finishes the release, and others may have to wait until its ttl
// runs out.  Later calls answer the same.  ctx bounds it
// (and the client's timeout): when it ends, the connection of a streamed hold is closed
// and the service lets the lock go once the validity it last told has run out.
func (l *Lock) Unlock(ctx context.Context) error {
	l.unlockOnce.Do(func() { l.unlockErr = l.unlock(ctx) })
	return l.unlockErr
}

// needsRelease says whether, after a loss for reason, some masters may still hold the
// lease: a DELETE is then sent (never for a reentrant hold, whose lease counts others'
// holds too; always for a set, whose other names its lease still holds).
func (l *Lock) needsRelease(lost error) bool {
	if l.reentrant {
		return false
	}
	if l.set {
		return true
	}
	var le *LostError
	if !errors.As(lost, &le) {
		return true
	}
	return le.Reason != "lease_lost" && le.Reason != "released"
}

func (l *Lock) unlock(ctx context.Context) error {
	l.mu.Lock()
	lost := l.err
	if l.err == nil {
		l.err = ErrUnlocked
	}
	if l.lossTimer != nil {
		l.lossTimer.Stop()
	}
	l.mu.Unlock()
	l.cancel() // the keeper stops: no extension may overtake the release
	if l.hold != nil {
		return l.unlockStream(ctx, lost)
	}
	<-l.done
	if lost != nil && !l.needsRelease(lost) {
		return lost
	}
	_, err := l.releaseFn(ctx) // also after a loss by silence: some masters may hold it
	switch {
	case lost != nil:
		return lost
	case errors.Is(err, ErrLeaseNotFound):
		return &LostError{Name: l.name, Reason: "lease_lost", Err: err}
	}
	return err
}

// ---- Extend: a PATCH every third of the ttl ----

func (c *Client) lockExtend(ctx context.Context, t target, o *LockOptions) (*Lock, *wireGrant, error) {
	w, sent, err := c.acquire(ctx, t, o)
	if err != nil {
		return nil, nil, err
	}
	g, err := grantOf("lock "+t.name, w)
	if err != nil {
		return nil, nil, err
	}
	l := c.newLock(t, g, Extend, sent.Add(g.Validity), o)
	if err := l.confirm(ctx, sent, g.Validity); err != nil {
		return nil, nil, err
	}
	l.armLossTimer()
	go l.extendLoop(l.Deadline().Add(-g.Validity))
	return l, w, nil
}

// confirm: the validity counts from when the request was sent (the only moment known to
// precede the round).  After a long wait little or none of it may be left: then the grant
// is confirmed by an extension first (or released, and an error returned).  Nothing is
// believed meanwhile (the Lock is not yet returned, its timer not yet set); an extension
// that succeeds proves a quorum still held the lease at its round, from its own send on.
func (l *Lock) confirm(ctx context.Context, sent time.Time, validity time.Duration) error {
	if time.Since(sent) <= validity/3 {
		return nil
	}
	cctx, cancel := l.c.callCtx(ctx, 0)
	s := time.Now()
	v, err := l.extendFn(cctx)
	cancel()
	if err == nil {
		l.mu.Lock()
		l.deadline = s.Add(v)
		l.mu.Unlock()
		return nil
	}
	rctx, rcancel := context.WithTimeout(context.Background(), l.c.timeout)
	defer rcancel()
	if !l.reentrant {
		l.releaseFn(rctx) // best effort: it was not confirmed
	}
	return fmt.Errorf("redlock: lock %s: the grant came after a wait and could not be confirmed: %w", l.name, err)
}

// extendLoop extends the lock a third of the ttl after the last successful extension
// was sent and retries a failed one every tenth of the ttl, each bounded by the lock's
// own deadline; it ends when the lock is lost (the loss timer, or the lease found gone)
// or unlocked.
func (l *Lock) extendLoop(lastSent time.Time) {
	defer close(l.done)
	retry := l.ttl / 10
	if retry < 20*time.Millisecond {
		retry = 20 * time.Millisecond
	}
	next := lastSent.Add(l.ttl / 3)
	for {
		if !sleepCtx(l.ctx, time.Until(next)) {
			return
		}
		actx, cancel := context.WithDeadline(l.ctx, l.Deadline().Add(-l.margin()))
		sent := time.Now()
		v, err := l.extendFn(actx)
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			l.prove(sent.Add(v))
			next = sent.Add(l.ttl / 3)
		case errors.Is(err, ErrLeaseNotFound):
			l.lose("lease_lost", err)
			return
		default:
			l.setLastErr(err)
			next = time.Now().Add(retry)
		}
	}
}
