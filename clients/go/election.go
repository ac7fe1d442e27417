// election.go -- leader election over one lock, in the shape of etcd's
// clientv3/concurrency.Election: Campaign blocks until this campaigner leads (a duplex
// streamed hold of the lock, granted to one campaigner at a time, in arrival order on
// an instance), Resign gives it up, Leader and Observe say who leads (the owner the
// leader campaigned with, and its fencing token).  The loss is signalled the Go way: the
// term's Done() channel and Context().

package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNoLeader is what Election.Leader answers when nobody leads.
var ErrNoLeader = errors.New("redlock: election has no leader")

// ErrNotLeader is what Election.Err answers before this campaigner leads.
var ErrNotLeader = errors.New("redlock: not the leader")

// ElectionOptions are the options of an Election; nil takes the defaults.
type ElectionOptions struct {
	// TTL of the leader's lock (0: the service's default, 30 s): a leader that stops
	// (dies, is paused, is cut off) is replaced about one ttl later, and a leader that
	// cannot reach the service steps down (Done) a tenth of it before its lock could end.
	TTL time.Duration
	// Wait is how long each campaign request waits in the service (0: 30 s); another
	// follows at once when it runs out.
	Wait time.Duration
}

// Leader is who leads an election.
type Leader struct {
	Name         string        // the election's lock
	Owner        string        // the value the leader campaigned with ("" if none)
	FencingToken int64         // the leader's term: larger for every later leader
	Validity     time.Duration // how long the lock is surely held, from the question's send
}

// Election is one campaigner of the election on a lock name.  Its methods are safe for
// concurrent use; one campaigner leads at most one term at a time.
type Election struct {
	c    *Client
	name string
	o    ElectionOptions

	mu   sync.Mutex
	term *Lock // the term in progress or last ended; nil before the first
}

// NewElection returns a campaigner of the election on the lock name (as etcd's
// concurrency.NewElection(session, prefix)).
func (c *Client) NewElection(name string, opts *ElectionOptions) *Election {
	e := &Election{c: c, name: name}
	if opts != nil {
		e.o = *opts
	}
	if e.o.Wait <= 0 {
		e.o.Wait = 30 * time.Second
	}
	return e
}

// Key is the election's lock name.
func (e *Election) Key() string { return e.name }

func (e *Election) current() *Lock {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// Campaign waits until this campaigner leads, with val as the owner others see
// (Leader, Observe; 1..256 printable ASCII bytes, or "" for none), or until ctx ends
// (ctx.Err()).  A campaigner that already leads returns nil at once.  Refusals and
// waits that ran out are tried again at once; a service that cannot answer (503, no
// answer) is tried again after a growing pause (100 ms to 5 s, jittered).  Errors that
// trying again cannot cure (ErrUnauthorized, ErrForbidden, ErrInvalidOwner...) end it.
// Leading ends when Done() is closed: lost (Err() a *LostError) or Resign.
func (e *Election) Campaign(ctx context.Context, val string) error {
	if l := e.current(); l != nil && l.Err() == nil {
		return nil
	}
	wait, pause := e.o.Wait, time.Duration(0)
	backoff := func() time.Duration {
		if pause *= 2; pause == 0 {
			pause = 100 * time.Millisecond
		}
		if pause > 5*time.Second {
			pause = 5 * time.Second
		}
		return jitter(pause)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		w := wait
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < w {
			w = time.Until(dl)
		}
		start := time.Now()
		l, err := e.c.Lock(ctx, e.name, &LockOptions{TTL: e.o.TTL, Wait: w, Owner: val, KeepAlive: Stream})
		if err == nil {
			e.mu.Lock()
			e.term = l
			e.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *Error
		switch {
		case errors.Is(err, ErrLockHeld), errors.Is(err, ErrLockContended):
			pause = 0
			if time.Since(start) < 50*time.Millisecond && w > 50*time.Millisecond {
				sleepCtx(ctx, jitter(100*time.Millisecond)) // refused without waiting
			}
		case errors.Is(err, ErrInvalidWait) && wait > time.Second:
			wait /= 2 // the service allows a shorter wait (--max-wait-ms)
		case errors.As(err, &ae) && ae.Status != 503 && ae.Status != 500:
			return err
		default: // 503, 500 or no answer
			sleepCtx(ctx, backoff())
		}
	}
}

// Resign gives up leading (the lock is released; the next campaigner leads at once).
// nil when this campaigner does not lead.  As Lock.Unlock otherwise.
func (e *Election) Resign(ctx context.Context) error {
	l := e.current()
	if l == nil {
		return nil
	}
	err := l.Unlock(ctx)
	if errors.Is(err, ErrLockLost) {
		return nil // not leading any more anyway
	}
	return err
}

// IsLeader says whether this campaigner leads now (as far as it can know: until Done).
func (e *Election) IsLeader() bool {
	l := e.current()
	return l != nil && l.Err() == nil
}

// Done is closed when this campaigner's term ends (lost, or Resign); closed already
// when it does not lead.
func (e *Election) Done() <-chan struct{} { return e.Context().Done() }

// Context is the term's: cancelled when it ends (already when not leading).
func (e *Election) Context() context.Context {
	if l := e.current(); l != nil {
		return l.Context()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// Err is nil while this campaigner leads; ErrNotLeader before its first term; then why
// the last term ended (a *LostError, errors.Is(err, ErrLockLost); or ErrUnlocked after
// Resign).
func (e *Election) Err() error {
	l := e.current()
	if l == nil {
		return ErrNotLeader
	}
	return l.Err()
}

// FencingToken is the term's fencing token (etcd's Rev): give it to what the leader
// writes to, which refuses a token smaller than the largest it has seen.  0 before the
// first term.
func (e *Election) FencingToken() int64 {
	if l := e.current(); l != nil {
		return l.FencingToken()
	}
	return 0
}

// Leader says who leads now: ErrNoLeader when nobody does.
func (e *Election) Leader(ctx context.Context) (*Leader, error) {
	s, err := e.c.Status(ctx, e.name)
	if err != nil {
		return nil, err
	}
	if !s.Held {
		return nil, ErrNoLeader
	}
	return &Leader{Name: s.Name, Owner: s.Owner, FencingToken: s.FencingToken, Validity: s.Validity}, nil
}

// Observe sends the leader at once (if there is one) and then each new one (a new term,
// by its fencing token), by watches of the lock, until ctx ends; then it closes the
// channel.  As etcd's, it sends leaders only: a time without one is not sent.  The
// channel holds the latest leader only: a slow reader skips terms, never the latest.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	go func() {
		defer close(out)
		var last int64 = -1
		for s := range e.c.Changes(ctx, e.name) {
			if !s.Held || s.FencingToken == last {
				continue
			}
			last = s.FencingToken
			select { // keep only the latest
			case <-out:
			default:
			}
			out <- Leader{Name: s.Name, Owner: s.Owner, FencingToken: s.FencingToken, Validity: s.Validity}
		}
	}()
	return out
}
