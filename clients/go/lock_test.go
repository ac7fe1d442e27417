// lock_test.go -- Lock with either keep-alive: held past its ttl, waiting, the loss
// signal (three masters frozen, the lease released elsewhere), cancellation, Unlock.

package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var modes = []KeepAlive{Stream, Extend}

// eachMode runs f once per keep-alive, as subtests named after it.
func eachMode(t *testing.T, f func(t *testing.T, mode KeepAlive)) {
	for _, m := range modes {
		m := m
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}

func TestLockUnlock(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		l, err := c.Lock(ctxFor(t, 10*time.Second), name,
			&LockOptions{TTL: 10 * time.Second, Owner: "lock-unlock", KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		if l.Name() != name || len(l.Lease()) != 32 || l.FencingToken() < 1 || l.TTL() != 10*time.Second ||
			!l.Deadline().After(time.Now()) || l.Err() != nil || l.Context().Err() != nil {
			t.Fatalf("a new lock: name %q lease %q token %d ttl %v deadline %v err %v",
				l.Name(), l.Lease(), l.FencingToken(), l.TTL(), l.Deadline(), l.Err())
		}
		s := mustStatus(t, c, name)
		if !s.Held || s.Owner != "lock-unlock" || s.FencingToken != l.FencingToken() {
			t.Fatalf("status while locked: %+v", s)
		}
		if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal("unlock:", err)
		}
		if l.Context().Err() == nil || !errors.Is(l.Err(), ErrUnlocked) {
			t.Fatalf("after unlock: context %v, err %v", l.Context().Err(), l.Err())
		}
		if s := mustStatus(t, c, name); s.Held {
			t.Fatalf("status after unlock: %+v", s)
		}
		if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal("a second unlock:", err)
		}
	})
}

// The keep-alive holds the lock well past its ttl, moving its deadline on.
func TestLockIsKeptPastItsTTL(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		ttl := 1500 * time.Millisecond
		l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: ttl, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		first := l.Deadline()
		waitFor(t, 10*time.Second, "the deadline to move on by 2 ttls", func() bool {
			return l.Deadline().After(first.Add(2 * ttl))
		})
		if l.Err() != nil {
			t.Fatal("lost:", l.Err())
		}
		if s := mustStatus(t, c, name); !s.Held || s.FencingToken != l.FencingToken() {
			t.Fatalf("status after 2 ttls: %+v", s)
		}
		if _, err := c.Acquire(ctxFor(t, 10*time.Second), name, nil); !errors.Is(err, ErrLockHeld) {
			t.Fatalf("another acquire: %v", err)
		}
	})
}

// Three of five masters frozen: no extension can succeed, and the lock's Context is
// cancelled before the validity it was last granted ends.
func TestLockLossIsSignalledWhenThreeMastersFreeze(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		ttl := 3 * time.Second
		l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: ttl, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		thaw := freeze(t, 3)
		select {
		case <-l.Context().Done():
		case <-time.After(ttl + 2*time.Second):
			t.Fatalf("no loss signal %v after freezing three masters", ttl+2*time.Second)
		}
		lostAt, deadline := time.Now(), l.Deadline()
		var le *LostError
		if !errors.Is(l.Err(), ErrLockLost) || !errors.As(l.Err(), &le) {
			t.Fatalf("Err after the loss: %v", l.Err())
		}
		t.Logf("lost (%v) %v before the validity ended", l.Err(), deadline.Sub(lostAt))
		if !lostAt.Before(deadline) {
			t.Fatalf("the loss was signalled %v after the validity ended", lostAt.Sub(deadline))
		}
		want := map[KeepAlive][]string{Stream: {"no_quorum", "expired"}, Extend: {"expired"}}[mode]
		if le.Reason != want[0] && (len(want) < 2 || le.Reason != want[1]) {
			t.Fatalf("reason %q, want one of %v", le.Reason, want)
		}
		thaw()
		if err := l.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, ErrLockLost) {
			t.Fatalf("unlock after the loss: %v", err)
		}
		// Unlock released what was left of the lease: the lock is free now, not when
		// the ttl runs out on the masters that still had it.
		g, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal("acquire after the loss and unlock:", err)
		}
		if g.FencingToken <= l.FencingToken() {
			t.Fatalf("token %d after the loss, %d before", g.FencingToken, l.FencingToken())
		}
		c.Release(ctxFor(t, 10*time.Second), name, g.Lease)
	})
}

// Someone else releases the lease: the stream says "released", the next extension
// finds the lease gone.
func TestLockLossIsSignalledWhenTheLeaseIsReleasedElsewhere(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 1500 * time.Millisecond, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctxFor(t, 10*time.Second), name, l.Lease()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("no loss signal within 5 s of the release")
		}
		var le *LostError
		want := map[KeepAlive]string{Stream: "released", Extend: "lease_lost"}[mode]
		if !errors.As(l.Err(), &le) || le.Reason != want {
			t.Fatalf("Err %v, want reason %s", l.Err(), want)
		}
		if err := l.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, ErrLockLost) {
			t.Fatalf("unlock after the loss: %v", err)
		}
	})
}

// A waiting Lock gets the lock when its holder unlocks, with a larger token.
func TestLockWaitsForTheHolder(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		a, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   *Lock
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := c.Lock(ctxFor(t, 30*time.Second), name,
				&LockOptions{TTL: 5 * time.Second, Wait: 20 * time.Second, KeepAlive: mode})
			got <- result{l, err}
		}()
		waitParked(t, 1)
		if err := a.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal("the waiter:", r.err)
			}
			defer r.l.Unlock(context.Background())
			if r.l.FencingToken() <= a.FencingToken() || r.l.Err() != nil {
				t.Fatalf("the waiter's token %d (first holder's %d), err %v", r.l.FencingToken(), a.FencingToken(), r.l.Err())
			}
			if s := mustStatus(t, c, name); !s.Held || s.FencingToken != r.l.FencingToken() {
				t.Fatalf("status: %+v", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not granted within 5 s of the unlock")
		}
	})
}

// Cancelling the ctx of a waiting Lock ends the wait at once, and the service forgets
// the waiter: the holder's unlock leaves the lock free.
func TestLockCancelledWhileWaiting(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		a, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() {
			_, err := c.Lock(ctx, name, &LockOptions{Wait: 20 * time.Second, KeepAlive: mode})
			got <- err
		}()
		waitParked(t, 1)
		start := time.Now()
		cancel()
		select {
		case err := <-got:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled wait: %v", err)
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("the cancelled wait returned after %v", time.Since(start))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled wait did not return within 5 s")
		}
		waitParked(t, 0)
		if err := a.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if s := mustStatus(t, c, name); s.Held {
			t.Fatalf("the lock was handed to a cancelled waiter: %+v", s)
		}
	})
}

func TestLockHeldAnswersLockHeld(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		a, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(context.Background())
		_, err = c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{KeepAlive: mode})
		var ae *Error
		if !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) || ae.RetryAfter <= 0 {
			t.Fatalf("Lock of a held lock: %v", err)
		}
	})
}

// A grant that comes after a wait longer than a third of its validity (counted from the
// request's send, little of it is left) is confirmed first (by the first alive answer, or
// an extension), then kept as any other.
func TestLockGrantedAfterALongWaitIsConfirmed(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		a, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ttl := 900 * time.Millisecond
		type result struct {
			l    *Lock
			err  error
			sent time.Time
		}
		got := make(chan result, 1)
		go func() {
			sent := time.Now()
			l, err := c.Lock(ctxFor(t, 30*time.Second), name, &LockOptions{TTL: ttl, Wait: 20 * time.Second, KeepAlive: mode})
			got <- result{l, err, sent}
		}()
		waitParked(t, 1)
		time.Sleep(ttl) // the waiter's own validity, counted from its send, is long gone
		if err := c.Release(ctxFor(t, 10*time.Second), name, a.Lease); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal("the waiter:", r.err)
		}
		defer r.l.Unlock(context.Background())
		if !r.l.Deadline().After(r.sent.Add(ttl)) || r.l.Err() != nil {
			t.Fatalf("the waiter's deadline %v after its send (ttl %v), err %v", r.l.Deadline().Sub(r.sent), ttl, r.l.Err())
		}
		first := r.l.Deadline()
		waitFor(t, 10*time.Second, "the deadline to move on by 2 ttls", func() bool {
			return r.l.Deadline().After(first.Add(2 * ttl))
		})
		if err := r.l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
}
