// api_test.go -- the rest of the API against the real service: reentrant holds, sets
// with per-name modes (plain and held), watches and Changes, the list, force-break (and
// the holder's loss by it, either keep-alive), a streamed hold cut by the relay, a
// streamed permit, the duplex release, and the probes.

package redlock

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"
)

// A reentrant lease holds the lock twice; each release gives one hold back, the lock is
// free at none.  Without Reentrant the same lease is a retry (the count stays).
func TestReentrantHolds(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	g, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Lease: g.Lease, Reentrant: true})
	if err != nil || g2.Holds != 2 || g2.FencingToken != g.FencingToken {
		t.Fatalf("a second hold: %+v, %v (first %+v)", g2, err, g)
	}
	if s, err := c.HoldCount(ctx, name, g.Lease); err != nil || s.Holds != 2 || !s.Held {
		t.Fatalf("hold count: %+v, %v", s, err)
	}
	if _, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Lease: g.Lease}); err != nil {
		t.Fatal("a retry with the lease:", err)
	}
	if n, err := c.ReleaseHold(ctx, name, g.Lease); err != nil || n != 1 {
		t.Fatalf("the first release: %d holds left, %v", n, err)
	}
	if s := mustStatus(t, c, name); !s.Held {
		t.Fatalf("released with a hold left: %+v", s)
	}
	if n, err := c.ReleaseHold(ctx, name, g.Lease); err != nil || n != 0 {
		t.Fatalf("the second release: %d holds left, %v", n, err)
	}
	if s := mustStatus(t, c, name); s.Held {
		t.Fatalf("held after the last release: %+v", s)
	}
	if _, err := c.Acquire(ctx, name, &LockOptions{Shared: true, Reentrant: true}); !errors.Is(err, ErrInvalidReentrant) {
		t.Fatalf("a shared reentrant acquire: %v", err)
	}
}

// A held Lock taken again by its own lease with Reentrant (either keep-alive): the inner
// Unlock gives its hold back and the outer still holds; the outer's Unlock frees it.
func TestReentrantLockInsideALock(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		outer, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 2 * time.Second, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer outer.Unlock(context.Background())
		inner, err := c.Lock(ctxFor(t, 10*time.Second), name,
			&LockOptions{TTL: 2 * time.Second, KeepAlive: mode, Lease: outer.Lease(), Reentrant: true})
		if err != nil {
			t.Fatal(err)
		}
		if inner.Holds() != 2 || inner.FencingToken() != outer.FencingToken() {
			t.Fatalf("inner: holds %d token %d (outer's %d)", inner.Holds(), inner.FencingToken(), outer.FencingToken())
		}
		if err := inner.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal("inner unlock:", err)
		}
		select { // the outer keeps it past its ttl
		case <-outer.Done():
			t.Fatalf("the outer hold was lost: %v", outer.Err())
		case <-time.After(2500 * time.Millisecond):
		}
		if s, err := c.HoldCount(ctxFor(t, 10*time.Second), name, outer.Lease()); err != nil || !s.Held || s.Holds != 1 {
			t.Fatalf("after the inner unlock: %+v, %v", s, err)
		}
		if err := outer.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal("outer unlock:", err)
		}
		if s := mustStatus(t, c, name); s.Held {
			t.Fatalf("held after both unlocks: %+v", s)
		}
	})
}

// Sets: all or nothing, per-name modes, one token per name, released together; a held
// set kept past its ttl and lost when one of its names is broken.
func TestSetsAllOrNothingWithModes(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	a, b, r := name+"/a", name+"/b", name+"/rates"
	g, err := c.AcquireSet(ctx, []string{a, b, r}, &SetOptions{TTL: 10 * time.Second, Shared: []string{r}})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Names) != 3 || g.FencingTokens[a] < 1 || g.FencingTokens[b] < 1 || !g.Shared[r] || g.Shared[a] ||
		g.Validity <= 0 || g.TTL != 10*time.Second {
		t.Fatalf("set grant %+v", g)
	}
	if _, err := c.AcquireSet(ctx, []string{name + "/c", b}, nil); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("an overlapping set: %v", err)
	}
	if s := mustStatus(t, c, name+"/c"); s.Held {
		t.Fatalf("a refused set kept a name: %+v", s)
	}
	if _, err := c.Acquire(ctx, r, &LockOptions{Shared: true}); err != nil {
		t.Fatal("another reader of the set's shared name:", err)
	}
	if _, err := c.Acquire(ctx, r, nil); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("a writer of the set's shared name: %v", err)
	}
	if _, err := c.Extend(ctx, a, g.Lease, 20*time.Second); err != nil {
		t.Fatal("extend one name of the set:", err)
	}
	names, err := c.ReleaseSet(ctx, g.Lease)
	sort.Strings(names)
	if err != nil || strings.Join(names, ",") != strings.Join([]string{a, b, r}, ",") {
		t.Fatalf("release set: %v, %v", names, err)
	}
	for _, n := range []string{a, b} {
		if s := mustStatus(t, c, n); s.Held {
			t.Fatalf("%s held after the set's release: %+v", n, s)
		}
	}
	if _, err := c.ReleaseSet(ctx, g.Lease); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("a second release of the set: %v", err)
	}
	if _, err := c.AcquireSet(ctx, []string{a, a}, nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("a repeated name: %v", err)
	}
}

func TestLockSetIsKeptAndLostWithAName(t *testing.T) {
	c, name := newClient(t), lockName(t)
	a, b := name+"/a", name+"/b"
	ttl := 900 * time.Millisecond
	s, err := c.LockSet(ctxFor(t, 10*time.Second), []string{a, b}, &SetOptions{TTL: ttl, Shared: []string{b}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(context.Background())
	if s.FencingToken(a) < 1 || !s.Shared(b) || len(s.Names()) != 2 || len(s.Lease()) != 32 {
		t.Fatalf("held set: names %v, token %d, shared %v", s.Names(), s.FencingToken(a), s.Shared(b))
	}
	first := s.Deadline()
	waitFor(t, 10*time.Second, "the set's deadline to move on by 2 ttls", func() bool {
		return s.Deadline().After(first.Add(2 * ttl))
	})
	if err := s.Err(); err != nil {
		t.Fatal("lost:", err)
	}
	if err := c.ForceRelease(ctxFor(t, 10*time.Second), a); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no loss signal within 5 s of a name's break")
	}
	var le *LostError
	if !errors.As(s.Err(), &le) || le.Reason != "lease_lost" {
		t.Fatalf("Err after the break: %v", s.Err())
	}
	if err := s.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, ErrLockLost) {
		t.Fatalf("unlock after the loss: %v", err)
	}
	// The set's other name is let go by Unlock, not left until its ttl ends.
	if st := mustStatus(t, c, b); st.Held || st.Readers != 0 {
		t.Fatalf("%s still held after the lost set's Unlock: %+v", b, st)
	}
}

// Force-break: the holder learns at its next extension (Extend) or from the service's
// hold (Stream); the next grant's token is larger.
func TestForceReleaseLosesTheHolder(t *testing.T) {
	eachMode(t, func(t *testing.T, mode KeepAlive) {
		c, name := newClient(t), lockName(t)
		l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 1500 * time.Millisecond, KeepAlive: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		if err := c.ForceRelease(ctxFor(t, 10*time.Second), name); err != nil {
			t.Fatal("force:", err)
		}
		g, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal("acquire after the break:", err)
		}
		defer c.Release(context.Background(), name, g.Lease)
		if g.FencingToken <= l.FencingToken() {
			t.Fatalf("token %d after the break, %d before", g.FencingToken, l.FencingToken())
		}
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the broken holder was not told within 5 s")
		}
		// Extend: its next PATCH finds the lease gone.  Stream: the service's hold sees the
		// break announced as a release and says released.
		want := map[KeepAlive]string{Extend: "lease_lost", Stream: "released"}[mode]
		var le *LostError
		if !errors.As(l.Err(), &le) || le.Reason != want {
			t.Fatalf("Err after the break: %v, want reason %s", l.Err(), want)
		}
		if err := c.ForceRelease(ctxFor(t, 10*time.Second), name+"/nobody"); err != nil {
			t.Fatal("force of a free lock:", err)
		}
	})
}

// The relay cuts the connection of a streamed hold: the loss is signalled at once
// (stream_ended), and Unlock frees the lock by a DELETE with the lease (the service
// would otherwise let it go only once the validity it told has run out).
func TestStreamCutByTheNetwork(t *testing.T) {
	useRelay(t)
	c, name := newClient(t), lockName(t)
	rc := newClientAt(t, relayURL)
	l, err := rc.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	relay(t, "cut")
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no loss signal within 5 s of the cut")
	}
	var le *LostError
	if !errors.As(l.Err(), &le) || le.Reason != "stream_ended" {
		t.Fatalf("Err after the cut: %v", l.Err())
	}
	if s := mustStatus(t, c, name); !s.Held {
		t.Fatalf("a cut released the lock at once (the holder may still count on it): %+v", s)
	}
	if err := l.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, ErrLockLost) {
		t.Fatalf("unlock after the cut: %v", err)
	}
	if s := mustStatus(t, c, name); s.Held {
		t.Fatalf("held after the unlock that followed the cut: %+v", s)
	}
}

// Unlock of a streamed hold releases it by {"release":true}: free at once, and the
// service's answer read (released, requested: no DELETE needed).
func TestStreamUnlockIsReleasedByTheService(t *testing.T) {
	c, name := newClient(t), lockName(t)
	l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if f := l.hold.finalLine(); f != "requested" {
		t.Fatalf("the service's last line: %q, want the release's answer", f)
	}
	if s := mustStatus(t, c, name); s.Held {
		t.Fatalf("held after unlock: %+v", s)
	}
}

// A permit held by a streamed hold: kept past its ttl, lost when the masters freeze
// (before its validity ends), and given back.
func TestSemaphoreStreamedPermit(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ttl := 1500 * time.Millisecond
	p, err := c.Semaphore(ctxFor(t, 10*time.Second), name, 2, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	if p.Permits() != 2 || p.FencingToken()%1024 != int64(p.Slot()) {
		t.Fatalf("permit: slot %d token %d", p.Slot(), p.FencingToken())
	}
	first := p.Deadline()
	waitFor(t, 10*time.Second, "the permit's deadline to move on by 2 ttls", func() bool {
		return p.Deadline().After(first.Add(2 * ttl))
	})
	if s, err := c.SemaphoreStatus(ctxFor(t, 10*time.Second), name); err != nil || s.Held != 1 {
		t.Fatalf("status: %+v, %v", s, err)
	}
	freeze(t, 3)
	select {
	case <-p.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("no loss signal after freezing three masters")
	}
	if !time.Now().Before(p.Deadline()) {
		t.Fatalf("the loss came %v after the validity ended", time.Since(p.Deadline()))
	}
	if !errors.Is(p.Err(), ErrLockLost) {
		t.Fatalf("Err: %v", p.Err())
	}
}

// Watch answers at a change (a grant) or when its wait runs out; Changes sends each
// state.
func TestWatchAndChanges(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	s0 := mustStatus(t, c, name)
	start := time.Now()
	s, err := c.Watch(ctx, name, s0.Index, 300*time.Millisecond)
	if err != nil || s.Index != s0.Index || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("a watch with nothing changing: %+v, %v after %v", s, err, time.Since(start))
	}
	changes := c.Changes(ctx, name)
	if first := <-changes; first.Held || first.Index != s0.Index {
		t.Fatalf("the first state: %+v", first)
	}
	got := make(chan *State, 1)
	go func() {
		s, err := c.Watch(ctx, name, s0.Index, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	time.Sleep(100 * time.Millisecond) // not needed for correctness: a later watch sees the grant too
	g, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Owner: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s == nil || !s.Held || s.Owner != "watched" || s.Index == s0.Index {
			t.Fatalf("the watch at the grant: %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not answer within 5 s of the grant")
	}
	select {
	case s := <-changes:
		if !s.Held || s.FencingToken != g.FencingToken {
			t.Fatalf("Changes at the grant: %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changes sent nothing within 5 s of the grant")
	}
	c.Release(ctx, name, g.Lease)
	select {
	case s := <-changes:
		if s.Held {
			t.Fatalf("Changes at the release: %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changes sent nothing within 5 s of the release")
	}
}

func TestList(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	for i, n := range []string{"b", "a", "c"} {
		opts := &LockOptions{TTL: 10 * time.Second}
		if i == 0 {
			opts.Owner = "lister"
		}
		g, err := c.Acquire(ctx, name+"/"+n, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release(context.Background(), name+"/"+n, g.Lease)
	}
	l, err := c.List(ctx, name+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Prefix != name+"/" || l.Truncated || len(l.Locks) != 3 || l.Locks[0].Name != name+"/a" ||
		l.Locks[1].Owner != "lister" || l.Locks[2].FencingToken < 1 || l.Locks[2].Validity <= 0 {
		t.Fatalf("list: %+v", l)
	}
	l, err = c.List(ctx, name+"/", 2)
	if err != nil || len(l.Locks) != 2 || !l.Truncated {
		t.Fatalf("list, limit 2: %+v, %v", l, err)
	}
	if l, err := c.List(ctx, name+"/nothing/", 0); err != nil || len(l.Locks) != 0 || l.Locks == nil {
		t.Fatalf("an empty list: %+v, %v", l, err)
	}
	if _, err := c.List(ctx, "", 5000); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("limit 5000: %v", err)
	}
}

func TestProbes(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t, 20*time.Second)
	for what, probe := range map[string]func(context.Context) (*Health, error){"health": c.Health, "ready": c.Ready} {
		h, err := probe(ctx)
		if err != nil || !h.Ready || h.Quorum != 3 || len(h.Masters) != 5 || h.Masters[0].State != "ready" ||
			!h.Masters[0].OK || h.Masters[0].Latency < 0 || h.Masters[0].Address == "" {
			t.Fatalf("%s: %+v, %v", what, h, err)
		}
	}
	m, err := c.Metrics(ctx)
	if err != nil || !strings.Contains(m, "\nredlockd_parked_waiters ") {
		t.Fatalf("metrics: %.200q, %v", m, err)
	}
	thaw := freeze(t, 3)
	h, err := c.Ready(ctx)
	if err != nil || h.Ready {
		t.Fatalf("ready with three masters frozen: %+v, %v", h, err)
	}
	thaw()
}

// A release that three frozen masters cannot confirm answers ErrReleaseUnconfirmed (with
// NodesOK and Quorum), from Release and from Unlock; the service finishes it once they
// are back.
func TestReleaseUnconfirmed(t *testing.T) {
	c, name := newClient(t), lockName(t)
	g, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctxFor(t, 10*time.Second), name+"/held", &LockOptions{TTL: 30 * time.Second, KeepAlive: Extend})
	if err != nil {
		t.Fatal(err)
	}
	thaw := freeze(t, 3)
	err = c.Release(ctxFor(t, 10*time.Second), name, g.Lease)
	var ae *Error
	if !errors.Is(err, ErrReleaseUnconfirmed) || !errors.As(err, &ae) || ae.Status != 503 || ae.Quorum != 3 || ae.NodesOK > 2 {
		t.Fatalf("a release with three masters frozen: %v", err)
	}
	if err := l.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, ErrReleaseUnconfirmed) {
		t.Fatalf("Unlock with three masters frozen: %v", err)
	}
	if l.Done() == nil || l.Context().Err() == nil {
		t.Fatal("an unconfirmed unlock left the lock believed")
	}
	thaw()
	for _, n := range []string{name, name + "/held"} {
		waitFor(t, 15*time.Second, n+" to be released by the service", func() bool { return !mustStatus(t, c, n).Held })
	}
}
