// lock.go -- Lock: a lock (exclusive or shared) held until Unlock, kept by a streamed
// hold or by extensions, whose Context is cancelled the moment it is lost; Permit: a
// permit of a semaphore held the same way.

package redlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Lock is a lock held until Unlock.  Its methods are safe for concurrent use.
type Lock struct {
	c     *Client
	t     target
	name  string
	lease string
	token int64
	ttl   time.Duration
	mode  KeepAlive

	ctx    context.Context // cancelled when the lock is lost or unlocked
	cancel context.CancelFunc

	keep     context.Context // the keeper's: its extensions, or the stream's request
	stopKeep context.CancelFunc
	done     chan struct{} // closed when the keeper has ended

	mu       sync.Mutex
	deadline time.Time // the validity last granted ends here
	err      error     // nil while held; *LostError or ErrUnlocked after

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

// Context is cancelled as soon as the lock is lost (or unlocked): stop working on what
// it protects then.  It does not inherit the cancellation of the ctx given to Lock.
func (l *Lock) Context() context.Context { return l.ctx }

// Err is nil while the lock is held; then a *LostError (errors.Is(err, ErrLockLost))
// saying why it was lost, or ErrUnlocked.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Deadline is when the validity last granted ends.  Context is cancelled a little
// before (a 25th of the ttl, 5 ms to 1 s) if no extension has succeeded by then.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// margin is how long before the deadline an unextended lock is declared lost, to leave
// its user time to stop.
func (l *Lock) margin() time.Duration {
	m := l.ttl / 25
	if m < 5*time.Millisecond {
		m = 5 * time.Millisecond
	}
	if m > time.Second {
		m = time.Second
	}
	return m
}

func (l *Lock) setDeadline(t time.Time) {
	l.mu.Lock()
	l.deadline = t
	l.mu.Unlock()
}

// lose records why the lock was lost, unless it already ended, and cancels Context.
func (l *Lock) lose(reason string, err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = &LostError{Name: l.name, Reason: reason, Err: err}
	}
	l.mu.Unlock()
	l.cancel()
}

// newLock makes the Lock of grant g of t, kept by mode in keep (which stopKeep ends).
func (c *Client) newLock(t target, g *Grant, mode KeepAlive, deadline time.Time,
	keep context.Context, stopKeep context.CancelFunc) *Lock {
	l := &Lock{c: c, t: t, name: t.name, lease: g.Lease, token: g.FencingToken, ttl: g.TTL,
		mode: mode, deadline: deadline, keep: keep, stopKeep: stopKeep,
		done: make(chan struct{})}
	if l.ttl <= 0 {
		l.ttl = g.Validity
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Lock acquires the lock name (waiting up to opts.Wait if it is held) and keeps it
// until Unlock: by a streamed hold (opts.KeepAlive Stream, the default) or by
// extending it every third of its ttl (Extend).  The returned Lock's Context is
// cancelled as soon as the lock is lost.  Always call Unlock, also after a loss.
// opts.Shared takes a read hold (either keep-alive).
//
// ctx bounds the acquire only.  Errors are *Error for the service's answers
// (errors.Is(err, ErrLockHeld), ErrQuorumUnavailable, ErrUnauthorized...).
//
// With Extend, an attempt that gets no answer in time is retried with the same lease,
// as Acquire does.  With Stream it is not: closing the connection of the attempt that
// got no answer makes the service release whatever it granted, so the error is
// returned and nothing stays held.
func (c *Client) Lock(ctx context.Context, name string, opts *LockOptions) (*Lock, error) {
	o := LockOptions{}
	if opts != nil {
		o = *opts
	}
	switch o.KeepAlive {
	case Stream:
		return c.lockStream(ctx, name, &o)
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
// opts.Wait for one, and keeps it until Release by extending it every third of its
// ttl (opts.KeepAlive is not used: this service ends a streamed hold of a permit at
// once).  Its Context is cancelled as soon as it is lost.  Errors as AcquirePermit's:
// ErrLockHeld when every permit is taken, ErrPermitsMismatch for another number.
func (c *Client) Semaphore(ctx context.Context, name string, permits int, opts *LockOptions) (*Permit, error) {
	o := LockOptions{}
	if opts != nil {
		o = *opts
	}
	l, w, err := c.lockExtend(ctx, semTarget(name, permits), &o)
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
// released it; the *LostError if it had been lost (errors.Is(err, ErrLockLost)); or the
// error of the release.  Later calls answer the same.
func (l *Lock) Unlock(ctx context.Context) error {
	l.unlockOnce.Do(func() { l.unlockErr = l.unlock(ctx) })
	return l.unlockErr
}

func (l *Lock) unlock(ctx context.Context) error {
	l.mu.Lock()
	lost := l.err
	if l.err == nil {
		l.err = ErrUnlocked
	}
	l.mu.Unlock()
	l.cancel()
	if l.mode == Extend {
		l.stopKeep() // no extension may overtake the release
		<-l.done
	}
	var err error
	var le *LostError
	if !errors.As(lost, &le) || (le.Reason != "lease_lost" && le.Reason != "released") {
		// Also after a loss by silence: the lease may still be on some masters.
		err = l.c.release(ctx, l.t, l.lease)
	}
	l.stopKeep() // a stream: closing it releases the lock too, should the DELETE fail
	<-l.done
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
	name := t.name
	g, err := grantOf("lock "+name, w)
	if err != nil {
		return nil, nil, err
	}
	// The validity counts from when the request was sent (the only moment known to
	// precede the round).  After a long wait little of it may be left: confirm the
	// grant by an extension first.
	deadline := sent.Add(g.Validity)
	if time.Since(sent) > g.Validity/3 {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		s := time.Now()
		e, err := c.extend(cctx, t, g.Lease, g.TTL)
		cancel()
		if err != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), c.attemptTimeout)
			_ = c.release(rctx, t, g.Lease) // best effort: it was not confirmed
			rcancel()
			return nil, nil, fmt.Errorf("redlock: lock %s: the grant came after a wait and could not be confirmed: %w", name, err)
		}
		deadline = s.Add(e.Validity)
	}
	keep, stopKeep := context.WithCancel(context.Background())
	l := c.newLock(t, g, Extend, deadline, keep, stopKeep)
	go l.extendLoop(deadline.Add(-g.Validity))
	return l, w, nil
}

// extendLoop extends the lock a third of the ttl after the last successful extension
// was sent, retries a failed one every tenth of the ttl, and declares the lock lost
// when its validity (less the margin) runs out first or the lease is found gone.
func (l *Lock) extendLoop(lastSent time.Time) {
	defer close(l.done)
	retry := l.ttl / 10
	if retry < 20*time.Millisecond {
		retry = 20 * time.Millisecond
	}
	next := lastSent.Add(l.ttl / 3)
	var lastErr error
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		end := l.Deadline().Add(-l.margin())
		wake := next
		if end.Before(wake) {
			wake = end
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(wake))
		select {
		case <-l.keep.Done():
			return
		case <-timer.C:
		}
		if !time.Now().Before(end) {
			l.lose("expired", lastErr)
			return
		}
		actx, cancel := context.WithDeadline(l.keep, end)
		sent := time.Now()
		e, err := l.c.extend(actx, l.t, l.lease, l.ttl)
		cancel()
		if l.keep.Err() != nil {
			return
		}
		switch {
		case err == nil:
			l.setDeadline(sent.Add(e.Validity))
			next, lastErr = sent.Add(l.ttl/3), nil
		case errors.Is(err, ErrLeaseNotFound):
			l.lose("lease_lost", err)
			return
		default:
			next, lastErr = time.Now().Add(retry), err
		}
	}
}

// ---- Stream: hold=stream, the service extends and says so ----

type streamLine struct {
	b   []byte
	at  time.Time
	err error
}

func (c *Client) lockStream(ctx context.Context, name string, o *LockOptions) (*Lock, error) {
	lease := o.Lease
	if lease == "" {
		lease = newLease()
	}
	op := "lock " + name
	keep, stopKeep := context.WithCancel(context.Background())
	t := lockTarget(name)
	req, err := c.newRequest(keep, http.MethodPost, t.path, acquireBody(t, o, lease, o.Wait, true))
	if err != nil {
		stopKeep()
		return nil, fmt.Errorf("redlock: %s: %w", op, err)
	}
	// Until the grant is read, the caller's ctx and the attempt's timeout end the
	// request; after, only Unlock or a loss does.
	timedOut := make(chan struct{})
	timer := time.AfterFunc(o.Wait+c.attemptTimeout, func() { close(timedOut); stopKeep() })
	granted := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stopKeep()
		case <-granted:
		}
	}()
	// fail ends the attempt: closing its connection makes the service let go of what
	// it may have granted.  err nil: the attempt's timer has fired.
	fail := func(err error) (*Lock, error) {
		stopped := timer.Stop()
		close(granted)
		stopKeep()
		var answer *Error
		if stopped && errors.As(err, &answer) {
			return nil, err // the service's answer, whatever happened since
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redlock: %s: %w", op, ctx.Err())
		}
		if err == nil || !stopped {
			<-timedOut
			return nil, fmt.Errorf("redlock: %s: no grant within %v: %w", op,
				o.Wait+c.attemptTimeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fail(fmt.Errorf("redlock: %s: %w", op, err))
	}
	if resp.StatusCode != http.StatusCreated {
		err := errorOf(op, resp)
		resp.Body.Close()
		return fail(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadBytes('\n')
	at := time.Now()
	if err != nil {
		resp.Body.Close()
		return fail(fmt.Errorf("redlock: %s: reading the grant: %w", op, err))
	}
	if ctx.Err() != nil || !timer.Stop() {
		resp.Body.Close()
		return fail(nil) // too late: ctx or the timer has ended it
	}
	close(granted)
	var w wireGrant
	g, err := (*Grant)(nil), json.Unmarshal(line, &w)
	if err == nil {
		g, err = w.grant()
	}
	if err != nil {
		stopKeep()
		resp.Body.Close()
		return nil, fmt.Errorf("redlock: %s: the grant %q: %w", op, line, err)
	}
	l := c.newLock(t, g, Stream, at.Add(g.Validity), keep, stopKeep)
	lines := make(chan streamLine, 4)
	go func() { // the reader: one line at a time, timed when it is read
		defer resp.Body.Close()
		for {
			b, err := br.ReadBytes('\n')
			select {
			case lines <- streamLine{b: b, at: time.Now(), err: err}:
			case <-keep.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go l.streamLoop(lines)
	return l, nil
}

// streamLoop follows the stream's events: each extension moves the deadline (counted
// from when its line was read); a "lost" or "released" line, the stream's end, or the
// deadline less the margin with no extension, loses the lock.
func (l *Lock) streamLoop(lines <-chan streamLine) {
	defer close(l.done)
	defer l.stopKeep() // ends the stream: the service releases the lock if it still holds it
	timer := time.NewTimer(time.Until(l.Deadline().Add(-l.margin())))
	defer timer.Stop()
	for {
		select {
		case <-l.keep.Done(): // by Unlock (then lose does nothing) or ctx racing the grant
			l.lose("stream_ended", l.keep.Err())
			return
		case <-timer.C:
			l.lose("expired", errors.New("no extension from the service within the validity"))
			return
		case ln := <-lines:
			if ln.err != nil {
				if l.keep.Err() == nil {
					l.lose("stream_ended", ln.err)
				}
				return
			}
			var ev struct {
				Event      string `json:"event"`
				Reason     string `json:"reason"`
				ValidityMs int64  `json:"validity_ms"`
			}
			if json.Unmarshal(ln.b, &ev) != nil {
				continue // not ours to judge: a later service may say more
			}
			switch ev.Event {
			case "extended":
				if ev.ValidityMs > 0 {
					l.setDeadline(ln.at.Add(ms(ev.ValidityMs)))
					if !timer.Stop() {
						<-timer.C
					}
					timer.Reset(time.Until(l.Deadline().Add(-l.margin())))
				}
			case "lost":
				reason := ev.Reason
				if reason == "" {
					reason = "lost"
				}
				l.lose(reason, nil)
				return
			case "released":
				var err error
				if ev.Reason != "" {
					err = errors.New("the service released it: " + ev.Reason)
				}
				l.lose("released", err)
				return
			}
		}
	}
}
