// shared_test.go -- shared locks and semaphores against the real service: readers at
// once with a writer refused, a writer waiting for readers, a semaphore of 2 that never
// has a third holder and gives a waiter the permit released, permits_mismatch, and the
// held forms (Lock with Shared, Semaphore) released at the end.

package redlock

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Four readers (ttl 600 ms) hold the name at once for more than two ttls while a writer
// is refused with 409 lock_held; once they have unlocked, the writer is granted a larger
// token.  Each keep-alive has its own round of readers.
func TestReadersHoldAtOnceAndKeepAWriterOut(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		const n = 4
		ttl := 600 * time.Millisecond
		readers := make([]*Lock, n)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range readers {
			i := i
			wg.Add(1)
			go func() {
				defer wg.Done()
				readers[i], errs[i] = c.Lock(ctxFor(t, 10*time.Second), name,
					&LockOptions{TTL: ttl, Shared: true, KeepAlive: mode})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("reader %d: %v", i, err)
			}
			l := readers[i]
			t.Cleanup(func() { l.Unlock(context.Background()) })
		}
		select {
		case <-readers[0].Context().Done():
			t.Fatalf("a reader was lost: %v", readers[0].Err())
		case <-time.After(1300 * time.Millisecond): // what is tested: held past two ttls
		}
		for i, l := range readers {
			if l.Err() != nil {
				t.Fatalf("reader %d lost: %v", i, l.Err())
			}
		}
		s := mustStatus(t, c, name)
		if s.Held || s.Readers != n || s.FencingToken != readers[0].FencingToken() {
			t.Fatalf("status with %d readers (token %d): %+v", n, readers[0].FencingToken(), s)
		}
		_, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: time.Second})
		var ae *Error
		if !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) || ae.Status != http.StatusConflict {
			t.Fatalf("a writer among readers: %v", err)
		}
		for i, l := range readers {
			if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatalf("unlock reader %d: %v", i, err)
			}
		}
		if s := mustStatus(t, c, name); s.Readers != 0 {
			t.Fatalf("readers left after unlock: %+v", s)
		}
		g, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: time.Second})
		if err != nil || g.FencingToken <= readers[0].FencingToken() || g.Shared {
			t.Fatalf("the writer after the readers: %+v, %v", g, err)
		}
		c.Release(ctxFor(t, 10*time.Second), name, g.Lease)
	})
}

// Two plain readers (extended and released by lease, like any grant); a writer that
// waits is granted when the last of them leaves, not before.
func TestSharedAcquireAndAWaitingWriter(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 30*time.Second)
	r1, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Shared: true})
	if err != nil {
		t.Fatal("a second reader:", err)
	}
	if !r1.Shared || !r2.Shared || r1.Lease == r2.Lease {
		t.Fatalf("readers %+v %+v", r1, r2)
	}
	if e, err := c.Extend(ctx, name, r1.Lease, 20*time.Second); err != nil || e.Validity <= 10*time.Second {
		t.Fatalf("extend a reader: %+v, %v", e, err)
	}
	type result struct {
		g   *Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := c.Acquire(ctx, name, &LockOptions{TTL: 5 * time.Second, Wait: 15 * time.Second})
		done <- result{g, err}
	}()
	waitParked(t, 1)
	if err := c.Release(ctx, name, r1.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("the writer was answered beside a reader: %+v, %v", r.g, r.err)
	default:
	}
	if err := c.Release(ctx, name, r2.Lease); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.g.Shared || r.g.FencingToken <= r1.FencingToken {
		t.Fatalf("the writer: %+v, %v", r.g, r.err)
	}
	if s := mustStatus(t, c, name); !s.Held || s.Readers != 0 {
		t.Fatalf("status with the writer: %+v", s)
	}
	c.Release(ctx, name, r.g.Lease)
}

// A semaphore of 2: two permits in slots 0 and 1, a third refused (409 lock_held), a
// waiter given the slot released, and its token larger than both.
func TestSemaphoreOfTwoRefusesAThirdAndHandsAPermitToAWaiter(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 30*time.Second)
	opts := &LockOptions{TTL: 10 * time.Second}
	p1, err := c.AcquirePermit(ctx, name, 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.AcquirePermit(ctx, name, 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Slot+p2.Slot != 1 || p1.Permits != 2 || p1.FencingToken%1024 != int64(p1.Slot) ||
		p2.FencingToken%1024 != int64(p2.Slot) {
		t.Fatalf("permits %+v %+v", p1, p2)
	}
	_, err = c.AcquirePermit(ctx, name, 2, opts)
	var ae *Error
	if !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) || ae.Status != http.StatusConflict ||
		ae.RetryAfter <= 5*time.Second {
		t.Fatalf("a third permit of 2: %v", err)
	}
	if s, err := c.SemaphoreStatus(ctx, name); err != nil || *s != (SemaphoreState{Name: name, Permits: 2, Held: 2, Free: 0}) {
		t.Fatalf("semaphore status: %+v, %v", s, err)
	}
	type result struct {
		p   *PermitGrant
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.AcquirePermit(ctx, name, 2, &LockOptions{TTL: 10 * time.Second, Wait: 15 * time.Second})
		done <- result{p, err}
	}()
	waitParked(t, 1)
	if err := c.ReleasePermit(ctx, name, p1.Lease); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.p.Slot != p1.Slot || r.p.FencingToken <= p1.FencingToken || r.p.FencingToken <= p2.FencingToken {
		t.Fatalf("the waiter: %+v, %v (released %+v)", r.p, r.err, p1)
	}
	e, err := c.ExtendPermit(ctx, name, p2.Lease, 20*time.Second)
	if err != nil || e.Validity <= 10*time.Second || e.FencingToken%1024 != int64(p2.Slot) {
		t.Fatalf("extend a permit: %+v, %v", e, err)
	}
	for _, p := range []*PermitGrant{p2, r.p} {
		if err := c.ReleasePermit(ctx, name, p.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ReleasePermit(ctx, name, p2.Lease); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("a second release: %v", err)
	}
	if s, err := c.SemaphoreStatus(ctx, name); err != nil || s.Held != 0 {
		t.Fatalf("semaphore status after: %+v, %v", s, err)
	}
}

func TestPermitsMismatchAndInvalidPermits(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	p, err := c.AcquirePermit(ctx, name, 2, &LockOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.ReleasePermit(ctx, name, p.Lease)
	for _, try := range []func() error{
		func() error { _, err := c.AcquirePermit(ctx, name, 3, nil); return err },
		func() error { _, err := c.Semaphore(ctx, name, 3, nil); return err },
	} {
		err := try()
		var ae *Error
		if !errors.Is(err, ErrPermitsMismatch) || errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) ||
			ae.Status != http.StatusConflict || ae.Permits != 2 {
			t.Fatalf("another number of permits: %v (%+v)", err, ae)
		}
	}
	for _, n := range []int{0, 2000} {
		if _, err := c.AcquirePermit(ctx, name, n, nil); !errors.Is(err, ErrInvalidPermits) {
			t.Fatalf("permits %d: %v", n, err)
		}
	}
	if _, err := c.AcquirePermit(ctx, name, 2, &LockOptions{Shared: true}); !errors.Is(err, ErrInvalidMode) {
		t.Fatalf("a shared permit: %v", err)
	}
}

// Two held permits of 2 (ttl 600 ms) kept past two ttls; a third refused; a waiting one
// gets the permit released; every Release gives its permit back.
func TestSemaphoreHeldFormKeepsAndReleasesItsPermits(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ttl := 600 * time.Millisecond
	a, err := c.Semaphore(ctxFor(t, 10*time.Second), name, 2, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	b, err := c.Semaphore(ctxFor(t, 10*time.Second), name, 2, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	if a.Slot()+b.Slot() != 1 || a.Permits() != 2 || a.FencingToken()%1024 != int64(a.Slot()) {
		t.Fatalf("permits: slot %d token %d, slot %d token %d", a.Slot(), a.FencingToken(), b.Slot(), b.FencingToken())
	}
	select {
	case <-a.Context().Done():
		t.Fatalf("a permit was lost: %v", a.Err())
	case <-b.Context().Done():
		t.Fatalf("a permit was lost: %v", b.Err())
	case <-time.After(1300 * time.Millisecond): // what is tested: held past two ttls
	}
	if s, err := c.SemaphoreStatus(ctxFor(t, 10*time.Second), name); err != nil || s.Held != 2 {
		t.Fatalf("status with two permits: %+v, %v", s, err)
	}
	if _, err := c.Semaphore(ctxFor(t, 10*time.Second), name, 2, &LockOptions{TTL: ttl}); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("a third permit of 2: %v", err)
	}
	type result struct {
		p   *Permit
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.Semaphore(ctxFor(t, 20*time.Second), name, 2, &LockOptions{TTL: ttl, Wait: 15 * time.Second})
		done <- result{p, err}
	}()
	waitParked(t, 1)
	if err := b.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal("the waiter:", r.err)
	}
	if r.p.Slot() != b.Slot() || r.p.FencingToken() <= b.FencingToken() {
		t.Fatalf("the waiter: slot %d token %d (released: slot %d token %d)", r.p.Slot(), r.p.FencingToken(), b.Slot(), b.FencingToken())
	}
	for _, p := range []*Permit{a, r.p} {
		if err := p.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := c.SemaphoreStatus(ctxFor(t, 10*time.Second), name); err != nil || s.Held != 0 {
		t.Fatalf("status after every release: %+v, %v", s, err)
	}
}
