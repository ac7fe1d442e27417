// inspect.go -- what reads and writes nothing: a lock's state (Status, Watch,
// HoldCount, Changes), a semaphore's, the list of held locks, and the probes (Health,
// Ready, Metrics).

package redlock

import (
	"context"
	"errors"
	"math/rand"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// State is what Status says of a lock.  It never contains the lease.
type State struct {
	Name         string
	Held         bool          // an exclusive holder holds it
	Owner        string        // "" when the grant named none
	Validity     time.Duration // 0 when not held; negative: held by a key without expiry
	FencingToken int64         // the latest token of the name, 0 if never granted
	Index        string        // changes whenever the lock's state does (see Watch)
	Shared       bool          // shared holders hold it
	Readers      int           // how many
	Holds        int           // HoldCount only: the lease's reentrant holds
}

type wireState struct {
	Name         string  `json:"name"`
	Held         bool    `json:"held"`
	Owner        *string `json:"owner"`
	ValidityMs   int64   `json:"validity_ms"`
	FencingToken int64   `json:"fencing_token"`
	Index        string  `json:"index"`
	Mode         string  `json:"mode"`
	Readers      int     `json:"readers"`
	Holds        int     `json:"holds"`
}

func (w *wireState) state() *State {
	s := &State{Name: w.Name, Held: w.Held, Validity: ms(w.ValidityMs),
		FencingToken: w.FencingToken, Index: w.Index, Shared: w.Mode == "shared",
		Readers: w.Readers, Holds: w.Holds}
	if w.Owner != nil {
		s.Owner = *w.Owner
	}
	return s
}

func (c *Client) inspect(ctx context.Context, name string, q url.Values, wait time.Duration) (*State, error) {
	path := lockTarget(name).path
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var w wireState
	cctx, cancel := c.callCtx(ctx, wait)
	defer cancel()
	if err := c.call(cctx, "status "+name, http.MethodGet, path, nil, &w); err != nil {
		return nil, err
	}
	return w.state(), nil
}

// Status says whether a quorum holds the lock name, for how long, who (the owner the
// grant named), its latest fencing token and its index.
func (c *Client) Status(ctx context.Context, name string) (*State, error) {
	return c.inspect(ctx, name, nil, 0)
}

// HoldCount is Status asked with the holder's lease: State.Holds is that lease's
// reentrant hold count (0 when it does not hold the lock).
func (c *Client) HoldCount(ctx context.Context, name, lease string) (*State, error) {
	return c.inspect(ctx, name, url.Values{"lease": {lease}}, 0)
}

// Watch waits until the lock's index is no longer index (a grant, a release, an
// expiry, a handoff) or wait has passed (at most the service's --max-wait-ms, 60 s by
// default), and answers the state then: compare its Index with index to tell which.
// It costs the service no polling while it waits.
func (c *Client) Watch(ctx context.Context, name, index string, wait time.Duration) (*State, error) {
	q := url.Values{"index": {index}, "wait_ms": {strconv.FormatInt(toMs(wait), 10)}}
	return c.inspect(ctx, name, q, wait)
}

// Changes sends the lock's state at once and then each time it changes (each new index),
// by watches of up to 30 s, until ctx ends; then it closes the channel.  A call that
// fails is tried again after a growing pause (100 ms to 5 s); the channel holds the
// latest state only, so a slow reader skips states, never the latest one.
func (c *Client) Changes(ctx context.Context, name string) <-chan State {
	out := make(chan State, 1)
	go func() {
		defer close(out)
		index, pause, wait := "", 100*time.Millisecond, 30*time.Second
		for ctx.Err() == nil {
			var s *State
			var err error
			if index == "" {
				s, err = c.Status(ctx, name)
			} else {
				s, err = c.Watch(ctx, name, index, wait)
			}
			if err != nil {
				if errors.Is(err, ErrInvalidWait) && wait > time.Second {
					wait /= 2 // a service with a shorter --max-wait-ms
					continue
				}
				if !sleepCtx(ctx, jitter(pause)) {
					return
				}
				if pause *= 2; pause > 5*time.Second {
					pause = 5 * time.Second
				}
				continue
			}
			pause = 100 * time.Millisecond
			if s.Index == index {
				continue
			}
			index = s.Index
			select { // keep only the latest
			case <-out:
			default:
			}
			out <- *s
		}
	}()
	return out
}

// jitter is d less up to half of it, at random.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int63n(int64(d)/2+1))
}

// sleepCtx sleeps d unless ctx ends first (false then).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// SemaphoreState is what SemaphoreStatus says of a semaphore.
type SemaphoreState struct {
	Name    string
	Permits int // the number its holders use; 0 when none was granted within the longest ttl
	Held    int // permits held now
	Free    int // Permits - Held (0 when Permits is)
}

// SemaphoreStatus says how many permits of the semaphore name are held, of how many.
func (c *Client) SemaphoreStatus(ctx context.Context, name string) (*SemaphoreState, error) {
	var w struct {
		Name    string `json:"name"`
		Permits *int   `json:"permits"`
		Held    int    `json:"held"`
		Free    *int   `json:"free"`
	}
	t := semTarget(name, 0)
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	if err := c.call(cctx, "semaphore status "+name, http.MethodGet, t.path, nil, &w); err != nil {
		return nil, err
	}
	s := &SemaphoreState{Name: w.Name, Held: w.Held}
	if w.Permits != nil {
		s.Permits = *w.Permits
	}
	if w.Free != nil {
		s.Free = *w.Free
	}
	return s, nil
}

// ListedLock is one lock of List.
type ListedLock struct {
	Name         string
	Owner        string
	Validity     time.Duration // as Status says it (negative: a key without expiry)
	FencingToken int64
}

// LockList is what List answers.
type LockList struct {
	Prefix    string // the prefix listed (narrowed to the token's scope if it was wider)
	Locks     []ListedLock
	Truncated bool // more names than the limit, or a master's scan stopped early: narrow the prefix
}

// List lists the locks a quorum holds whose names start with prefix (all: ""), by name,
// at most limit of them (1..1000; 0: the service's default, 100).  Never a lease.
func (c *Client) List(ctx context.Context, prefix string, limit int) (*LockList, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/locks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var w struct {
		Prefix string `json:"prefix"`
		Locks  []struct {
			Name         string  `json:"name"`
			Owner        *string `json:"owner"`
			ValidityMs   int64   `json:"validity_ms"`
			FencingToken int64   `json:"fencing_token"`
		} `json:"locks"`
		Truncated bool `json:"truncated"`
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	if err := c.call(cctx, "list "+prefix, http.MethodGet, path, nil, &w); err != nil {
		return nil, err
	}
	l := &LockList{Prefix: w.Prefix, Truncated: w.Truncated, Locks: []ListedLock{}}
	for _, x := range w.Locks {
		ll := ListedLock{Name: x.Name, Validity: ms(x.ValidityMs), FencingToken: x.FencingToken}
		if x.Owner != nil {
			ll.Owner = *x.Owner
		}
		l.Locks = append(l.Locks, ll)
	}
	return l, nil
}

// Health is what Health and Ready answer.
type Health struct {
	Ready   bool // a quorum of masters is usable
	Quorum  int
	Masters []MasterHealth
}

// MasterHealth is one master's line of Health.
type MasterHealth struct {
	Address string  // as configured, without any password
	OK      bool    // counts towards a quorum now
	State   string  // down, connecting, unmarked, quarantined, ready
	Latency float64 // ms; negative when unknown
}

func (c *Client) probe(ctx context.Context, path string) (*Health, error) {
	var w struct {
		Ready   bool `json:"ready"`
		Quorum  int  `json:"quorum"`
		Masters []struct {
			Address   string   `json:"address"`
			OK        bool     `json:"ok"`
			State     string   `json:"state"`
			LatencyMs *float64 `json:"latency_ms"`
		} `json:"masters"`
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	// /readyz answers 503 with the same body when no quorum answers.
	if _, err := c.callStatus(cctx, "probe "+path, http.MethodGet, path, nil, &w,
		[]int{http.StatusServiceUnavailable}); err != nil {
		return nil, err
	}
	h := &Health{Ready: w.Ready, Quorum: w.Quorum}
	for _, m := range w.Masters {
		mh := MasterHealth{Address: m.Address, OK: m.OK, State: m.State, Latency: -1}
		if m.LatencyMs != nil {
			mh.Latency = *m.LatencyMs
		}
		h.Masters = append(h.Masters, mh)
	}
	return h, nil
}

// Health is GET /healthz: the service is alive, and what it last knew of each master
// (Ready: whether a quorum of them is usable).  For liveness, never readiness.
func (c *Client) Health(ctx context.Context) (*Health, error) { return c.probe(ctx, "/healthz") }

// Ready is GET /readyz: a fresh PING of every master.  Not ready (HTTP 503) is a Health
// with Ready false, not an error.
func (c *Client) Ready(ctx context.Context) (*Health, error) { return c.probe(ctx, "/readyz") }

// Metrics is GET /metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var s string
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	err := c.call(cctx, "metrics", http.MethodGet, "/metrics", nil, &s)
	return s, err
}
