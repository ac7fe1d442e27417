// sets.go -- multi-name sets: 1..32 locks taken together, all or nothing, under one
// lease (POST /locks, DELETE /locks), each name exclusive or shared; LockSet holds a set
// until Unlock by extending each of its names.

package redlock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SetOptions are the options of AcquireSet and LockSet.  nil: the service's default
// ttl, no wait, exclusive holds, a lease of the client's making.
type SetOptions struct {
	TTL    time.Duration // 0: the service's default
	Wait   time.Duration // wait up to this long for names held by others (0: ErrLockHeld at once)
	Lease  string        // "" makes a random one; repeat one to retry an acquire
	Shared []string      // names of the set held shared (read holds); the others exclusive
}

// SetGrant is a granted set.
type SetGrant struct {
	Names         []string         // in the order asked
	Lease         string           // one lease for the whole set
	FencingTokens map[string]int64 // one per name (a shared name: the last writer's token)
	Shared        map[string]bool  // the names held shared
	Validity      time.Duration    // counted from the request's send
	TTL           time.Duration
}

func setTarget(names []string, o *SetOptions) target {
	t := target{name: strings.Join(names, ","), path: "/locks", names: names}
	if o != nil && len(o.Shared) > 0 {
		t.shared = map[string]bool{}
		for _, n := range o.Shared {
			t.shared[n] = true
		}
	}
	return t
}

func setLockOptions(o *SetOptions) *LockOptions {
	if o == nil {
		return &LockOptions{}
	}
	return &LockOptions{TTL: o.TTL, Wait: o.Wait, Lease: o.Lease}
}

func setGrantOf(op string, w *wireGrant) (*SetGrant, error) {
	if w.Lease == "" || w.ValidityMs == nil || len(w.Names) == 0 || len(w.FencingTokens) != len(w.Names) {
		return nil, fmt.Errorf("redlock: %s: the grant lacks names, lease, fencing_tokens or validity_ms", op)
	}
	g := &SetGrant{Names: w.Names, Lease: w.Lease, FencingTokens: w.FencingTokens,
		Shared: map[string]bool{}, Validity: ms(*w.ValidityMs), TTL: ms(w.TTLMs)}
	for n, m := range w.Modes {
		if m == "shared" {
			g.Shared[n] = true
		}
	}
	return g, nil
}

// AcquireSet takes every name of names (1..32, distinct) at once, or none: on every
// master one script call takes all of them, so callers asking for overlapping sets in
// any order cannot deadlock.  Nothing keeps them: extend each name with Extend and the
// set's lease, release them with ReleaseSet (or each with Release).  Retried with its
// lease when no answer came, as Acquire.
func (c *Client) AcquireSet(ctx context.Context, names []string, opts *SetOptions) (*SetGrant, error) {
	t := setTarget(names, opts)
	w, _, err := c.acquire(ctx, t, setLockOptions(opts))
	if err != nil {
		return nil, err
	}
	return setGrantOf("acquire "+t.name, w)
}

// ReleaseSet releases every name a set's acquire granted under lease, and answers them.
// A lease that holds no set answers ErrLeaseNotFound.
func (c *Client) ReleaseSet(ctx context.Context, lease string) ([]string, error) {
	var w struct {
		Names    []string `json:"names"`
		Released bool     `json:"released"`
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	if err := c.call(cctx, "release set", http.MethodDelete, "/locks", map[string]any{"lease": lease}, &w); err != nil {
		return nil, err
	}
	if !w.Released {
		return w.Names, errors.New("redlock: release set: the answer does not say released")
	}
	return w.Names, nil
}

// LockSet is a set of locks held until Unlock, kept by extensions of each of its names
// every third of the ttl.  Its Context is cancelled as soon as any name is lost (or a
// margin before the latest validity proven for all of them ends).
type LockSet struct {
	l      *Lock
	names  []string
	tokens map[string]int64
	shared map[string]bool
}

// LockSet takes the set as AcquireSet does and keeps it until Unlock.
func (c *Client) LockSet(ctx context.Context, names []string, opts *SetOptions) (*LockSet, error) {
	t := setTarget(names, opts)
	o := setLockOptions(opts)
	w, sent, err := c.acquire(ctx, t, o)
	if err != nil {
		return nil, err
	}
	sg, err := setGrantOf("lock "+t.name, w)
	if err != nil {
		return nil, err
	}
	g := &Grant{Name: t.name, Lease: sg.Lease, Validity: sg.Validity, TTL: sg.TTL}
	l := c.newLock(t, g, Extend, sent.Add(sg.Validity), o)
	l.set = true
	// One extension of the set: every name, at once; it proves the least validity, and
	// fails if any name fails (the lease gone from one of them first).
	l.extendFn = func(ctx context.Context) (time.Duration, error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		least := time.Duration(-1)
		var firstErr error
		for _, n := range sg.Names {
			n := n
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := c.extend(ctx, lockTarget(n), sg.Lease, l.ttl)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					if firstErr == nil || errors.Is(err, ErrLeaseNotFound) {
						firstErr = err
					}
				case least < 0 || e.Validity < least:
					least = e.Validity
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return 0, firstErr
		}
		return least, nil
	}
	l.releaseFn = func(ctx context.Context) (int, error) {
		_, err := c.ReleaseSet(ctx, sg.Lease)
		return 0, err
	}
	if err := l.confirm(ctx, sent, sg.Validity); err != nil {
		return nil, err
	}
	l.armLossTimer()
	go l.extendLoop(l.Deadline().Add(-sg.Validity))
	return &LockSet{l: l, names: sg.Names, tokens: sg.FencingTokens, shared: sg.Shared}, nil
}

// Names are the set's names, in the order asked.
func (s *LockSet) Names() []string { return append([]string(nil), s.names...) }

// FencingToken is name's fencing token (0 for a name not in the set).
func (s *LockSet) FencingToken(name string) int64 { return s.tokens[name] }

// Shared says whether name is held shared.
func (s *LockSet) Shared(name string) bool { return s.shared[name] }

// Lease is the set's secret (never log it).
func (s *LockSet) Lease() string { return s.l.lease }

// Context is cancelled as soon as any name is lost, or at Unlock.
func (s *LockSet) Context() context.Context { return s.l.ctx }

// Done is Context().Done().
func (s *LockSet) Done() <-chan struct{} { return s.l.ctx.Done() }

// Err is nil while the set is held; then a *LostError or ErrUnlocked.
func (s *LockSet) Err() error { return s.l.Err() }

// Deadline is when the latest validity proven for every name ends.
func (s *LockSet) Deadline() time.Time { return s.l.Deadline() }

// Unlock releases every name of the set (DELETE /locks) and stops keeping it; as
// Lock.Unlock.
func (s *LockSet) Unlock(ctx context.Context) error { return s.l.Unlock(ctx) }
