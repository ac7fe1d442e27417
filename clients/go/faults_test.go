// faults_test.go -- an acquire whose answer is lost: retried with the same lease (and
// the grant taken up), or, for a streamed hold, released by the service when the
// connection closes; and a stream that goes silent.  A TCP proxy in front of the real
// service swallows the answers.

package redlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy forwards connections to the service.  With swallowFirst, the answer on
// the first connection is read (and decoded: the grant) but never passed on; mute
// drops everything the service sends on the connections open so far.
type faultProxy struct {
	ln           net.Listener
	target       string
	swallowFirst bool
	granted      chan wireGrant // the grant the service answered on the first connection
	mu           sync.Mutex
	n            int
	conns        []net.Conn
	muted        []*int32 // one flag per connection: drop what the service sends
}

func newFaultProxy(t *testing.T, swallowFirst bool) *faultProxy {
	t.Helper()
	u, err := url.Parse(testURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: u.Host, swallowFirst: swallowFirst, granted: make(chan wireGrant, 1)}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// mute makes the connections open now drop what the service sends them.
func (p *faultProxy) mute() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.muted {
		atomic.StoreInt32(m, 1)
	}
}

func (p *faultProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		muted := new(int32)
		p.mu.Lock()
		p.n++
		first := p.n == 1
		p.conns = append(p.conns, down, up)
		p.muted = append(p.muted, muted)
		p.mu.Unlock()
		go func() { // client to service; the client hanging up hangs up on the service
			io.Copy(up, down)
			up.Close()
			down.Close()
		}()
		if !first || !p.swallowFirst {
			go func() { // service to client, unless muted
				buf := make([]byte, 4096)
				for {
					n, err := up.Read(buf)
					if n > 0 && atomic.LoadInt32(muted) == 0 {
						if _, werr := down.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				down.Close()
				up.Close()
			}()
			continue
		}
		go func() { // the first answer: decoded, kept from the client
			br := bufio.NewReader(up)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			var w wireGrant
			switch resp.StatusCode {
			case http.StatusCreated:
				if json.NewDecoder(resp.Body).Decode(&w) == nil {
					p.granted <- w
				}
			case http.StatusSwitchingProtocols: // a duplex hold: the grant is the first line
				if line, err := br.ReadBytes('\n'); err == nil && json.Unmarshal(line, &w) == nil {
					p.granted <- w
				}
			}
			io.Copy(io.Discard, br)
		}()
	}
}

// swallowed is the grant whose answer the proxy kept from the client.
func (p *faultProxy) swallowed(t *testing.T) wireGrant {
	t.Helper()
	select {
	case w := <-p.granted:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the service answered no grant on the first connection")
	}
	return wireGrant{}
}

// Acquire: the first attempt's answer is lost, the retry with the same lease gets the
// same grant (same lease, same fencing token), and the lock is held by that lease.
func TestAcquireWhoseAnswerIsLostIsRetriedWithTheSameLease(t *testing.T) {
	p := newFaultProxy(t, true)
	c, name := newClient(t), lockName(t)
	pc, err := New(p.url(), WithToken(testToken), WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g, err := pc.Acquire(ctxFor(t, 20*time.Second), name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal("acquire through the proxy:", err)
	}
	first := p.swallowed(t)
	if time.Since(start) < 500*time.Millisecond {
		t.Fatalf("answered after %v: the first attempt cannot have timed out", time.Since(start))
	}
	if g.Lease != first.Lease || first.FencingToken == nil || g.FencingToken != *first.FencingToken {
		t.Fatalf("the retry's grant %+v is not the lost one %+v (token %v)", g, first, *first.FencingToken)
	}
	if s := mustStatus(t, c, name); !s.Held || s.FencingToken != g.FencingToken {
		t.Fatalf("status: %+v", s)
	}
	if _, err := c.Acquire(ctxFor(t, 10*time.Second), name, nil); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("another acquire: %v", err)
	}
	if err := c.Release(ctxFor(t, 10*time.Second), name, g.Lease); err != nil {
		t.Fatal(err)
	}
}

// Without retries the lost answer is an error (so the test above can fail).
func TestAcquireWithoutRetriesReportsTheLostAnswer(t *testing.T) {
	p := newFaultProxy(t, true)
	name := lockName(t)
	pc, err := New(p.url(), WithToken(testToken), WithTimeout(300*time.Millisecond), WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pc.Acquire(ctxFor(t, 20*time.Second), name, &LockOptions{TTL: 30 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire whose answer is lost, no retries: %v", err)
	}
	first := p.swallowed(t)
	newClient(t).Release(ctxFor(t, 10*time.Second), name, first.Lease)
}

// Lock with Extend: the same retry, and the lock is then kept.
func TestLockExtendWhoseAnswerIsLostIsRetriedWithTheSameLease(t *testing.T) {
	p := newFaultProxy(t, true)
	c, name := newClient(t), lockName(t)
	pc, err := New(p.url(), WithToken(testToken), WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	l, err := pc.Lock(ctxFor(t, 20*time.Second), name, &LockOptions{TTL: 5 * time.Second, KeepAlive: Extend})
	if err != nil {
		t.Fatal("lock through the proxy:", err)
	}
	defer l.Unlock(context.Background())
	first := p.swallowed(t)
	if l.Lease() != first.Lease || l.FencingToken() != *first.FencingToken {
		t.Fatalf("the lock (lease %s, token %d) is not the lost grant %+v", l.Lease(), l.FencingToken(), first)
	}
	if s := mustStatus(t, c, name); !s.Held || s.FencingToken != l.FencingToken() {
		t.Fatalf("status: %+v", s)
	}
	if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := mustStatus(t, c, name); s.Held {
		t.Fatalf("status after unlock: %+v", s)
	}
}

// Lock with Stream: the attempt whose grant is lost times out; the service would let the
// grant go only when its validity is over (a hang-up may be a cut), so the client
// releases its own lease by a DELETE (the ttl is a minute: only that release can free it
// within the test's deadline).
func TestLockStreamWhoseAnswerIsLostLeavesNothingHeld(t *testing.T) {
	p := newFaultProxy(t, true)
	c, name := newClient(t), lockName(t)
	pc, err := New(p.url(), WithToken(testToken), WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pc.Lock(ctxFor(t, 20*time.Second), name, &LockOptions{TTL: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a streamed lock whose grant is lost: %v", err)
	}
	first := p.swallowed(t)
	if first.Lease == "" {
		t.Fatal("the service granted nothing")
	}
	waitFor(t, 10*time.Second, "the lost grant to be released", func() bool {
		return !mustStatus(t, c, name).Held
	})
}

// A stream that goes silent (the network, not the service, fails): the client's own
// deadline declares the lock lost before the validity last announced ends, and closes
// the stream, which makes the service release it.
func TestLockStreamThatGoesSilentIsLostBeforeItsValidityEnds(t *testing.T) {
	p := newFaultProxy(t, false)
	c, name := newClient(t), lockName(t)
	pc, err := New(p.url(), WithToken(testToken))
	if err != nil {
		t.Fatal(err)
	}
	ttl := 3 * time.Second
	l, err := pc.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	p.mute()
	select {
	case <-l.Context().Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("no loss signal %v after the stream went silent", ttl+2*time.Second)
	}
	lostAt, deadline := time.Now(), l.Deadline()
	var le *LostError
	if !errors.As(l.Err(), &le) || le.Reason != "expired" {
		t.Fatalf("Err after the silence: %v", l.Err())
	}
	if !lostAt.Before(deadline) {
		t.Fatalf("the loss was signalled %v after the validity ended", lostAt.Sub(deadline))
	}
	waitFor(t, 10*time.Second, "the service to release the silent stream's lock", func() bool {
		return !mustStatus(t, c, name).Held
	})
}
