// client_test.go -- the plain calls (Acquire, Extend, Status, Release) against the real
// service, and the errors they answer.

package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestAcquireExtendStatusRelease(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	g, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Owner: "go test pid 1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != name || len(g.Lease) != 32 || g.FencingToken < 1 || g.TTL != 10*time.Second ||
		g.Validity <= 0 || g.Validity > g.TTL {
		t.Fatalf("grant %+v", g)
	}
	s := mustStatus(t, c, name)
	if !s.Held || s.Owner != "go test pid 1" || s.FencingToken != g.FencingToken || s.Index == "" {
		t.Fatalf("status while held: %+v", s)
	}
	e, err := c.Extend(ctx, name, g.Lease, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e.FencingToken < g.FencingToken || e.TTL != 20*time.Second || e.Validity <= 10*time.Second {
		t.Fatalf("extension %+v of grant %+v", e, g)
	}
	if err := c.Release(ctx, name, g.Lease); err != nil {
		t.Fatal(err)
	}
	if s := mustStatus(t, c, name); s.Held || s.Owner != "" || s.Validity != 0 {
		t.Fatalf("status after release: %+v", s)
	}
	err = c.Release(ctx, name, g.Lease)
	var ae *Error
	if !errors.Is(err, ErrLeaseNotFound) || !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("second release: %v", err)
	}
	if _, err := c.Extend(ctx, name, g.Lease, 0); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("extend after release: %v", err)
	}
}

func TestAcquireHeldAnswersLockHeld(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	g, err := c.Acquire(ctx, name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, name, g.Lease)
	_, err = c.Acquire(ctx, name, nil)
	var ae *Error
	if !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) {
		t.Fatalf("acquire of a held lock: %v", err)
	}
	if ae.Status != http.StatusConflict || ae.RetryAfter <= 20*time.Second || ae.RetryAfter > 30*time.Second ||
		ae.RequestID == "" || ae.Message == "" {
		t.Fatalf("the 409: %+v", ae)
	}
}

func TestAcquireWithTheSameLeaseIsIdempotent(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	lease := NewLease()
	g1, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Lease: lease})
	if err != nil {
		t.Fatal("the retry with the same lease:", err)
	}
	if g1.Lease != lease || g2.Lease != lease || g2.FencingToken != g1.FencingToken {
		t.Fatalf("the retry's grant %+v differs from the first %+v", g2, g1)
	}
	if _, err := c.Acquire(ctx, name, nil); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("another lease: %v", err)
	}
	if err := c.Release(ctx, name, lease); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireWaitsForTheRelease(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 30*time.Second)
	a, err := c.Acquire(ctx, name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   *Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := c.Acquire(ctx, name, &LockOptions{TTL: 10 * time.Second, Wait: 20 * time.Second})
		got <- result{g, err}
	}()
	waitParked(t, 1)
	if err := c.Release(ctx, name, a.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal("the waiter:", r.err)
		}
		if r.g.FencingToken <= a.FencingToken {
			t.Fatalf("the waiter's token %d is not above the first holder's %d", r.g.FencingToken, a.FencingToken)
		}
		c.Release(ctx, name, r.g.Lease)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted within 5 s of the release")
	}
}

func TestAcquireWaitRunsOut(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 20*time.Second)
	a, err := c.Acquire(ctx, name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, name, a.Lease)
	start := time.Now()
	_, err = c.Acquire(ctx, name, &LockOptions{Wait: 400 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, ErrLockHeld) {
		t.Fatalf("a wait that runs out: %v", err)
	}
	if took < 350*time.Millisecond || took > 5*time.Second { // the service times it to the ms
		t.Fatalf("a 400 ms wait answered after %v", took)
	}
}

func TestWithoutAValidTokenIsUnauthorized(t *testing.T) {
	name := lockName(t)
	for _, opts := range [][]Option{nil, {WithToken("not-a-token-0123456789")}} {
		c, err := New(testURL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Acquire(ctxFor(t, 10*time.Second), name, nil)
		var ae *Error
		if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("acquire with options %d: %v", len(opts), err)
		}
	}
}

func TestInvalidArgumentsAnswerTheirCodes(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := c.Acquire(ctx, "no spaces allowed", nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a name with spaces: %v", err)
	}
	if _, err := c.Acquire(ctx, lockName(t), &LockOptions{TTL: 2 * time.Hour}); !errors.Is(err, ErrInvalidTTL) {
		t.Errorf("a 2 h ttl: %v", err)
	}
	if _, err := c.Acquire(ctx, lockName(t), &LockOptions{Lease: "short"}); !errors.Is(err, ErrInvalidLease) {
		t.Errorf("a short lease: %v", err)
	}
	if _, err := c.Acquire(ctx, lockName(t), &LockOptions{Owner: "tab\there"}); !errors.Is(err, ErrInvalidOwner) {
		t.Errorf("an owner with a tab: %v", err)
	}
}

func TestNamesWithSlashesAndDotsRoundTrip(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t, 10*time.Second)
	name := "go/a.b/c:d-e_f/" + lockName(t)
	g, err := c.Acquire(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != name {
		t.Fatalf("granted %q for %q", g.Name, name)
	}
	if s := mustStatus(t, c, name); !s.Held || s.Name != name {
		t.Fatalf("status %+v", s)
	}
	if err := c.Release(ctx, name, g.Lease); err != nil {
		t.Fatal(err)
	}
}

func TestQuorumUnavailableWhenThreeMastersFreeze(t *testing.T) {
	c, name := newClient(t), lockName(t)
	thaw := freeze(t, 3)
	_, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 5 * time.Second})
	var ae *Error
	if !errors.Is(err, ErrQuorumUnavailable) || !errors.As(err, &ae) {
		t.Fatalf("acquire with 3 of 5 masters frozen: %v", err)
	}
	if ae.Status != http.StatusServiceUnavailable || ae.Quorum != 3 || ae.NodesOK > 2 {
		t.Fatalf("the 503: %+v", ae)
	}
	thaw()
	g, err := c.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal("after the masters came back:", err)
	}
	c.Release(ctxFor(t, 10*time.Second), name, g.Lease)
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "ftp://host/", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := New(testURL, WithHTTPClient(&http.Client{Timeout: time.Second})); err == nil {
		t.Error("an http.Client with a Timeout was accepted")
	}
	if _, err := New(testURL, WithTimeout(0)); err == nil {
		t.Error("a zero timeout was accepted")
	}
	if _, err := New(testURL, WithHTTPClient(&http.Client{}), WithTLSConfig(&tls.Config{})); err == nil {
		t.Error("WithTLSConfig beside WithHTTPClient was accepted")
	}
	if _, err := New(testURL+"/", WithHTTPClient(&http.Client{})); err != nil {
		t.Error(err)
	}
}

// New("") reads REDLOCK_URL (else DefaultURL) and REDLOCK_TOKEN; an explicit URL reads
// neither, and WithToken wins over REDLOCK_TOKEN.
func TestNewFromTheEnvironment(t *testing.T) {
	t.Setenv("REDLOCK_URL", "")
	t.Setenv("REDLOCK_TOKEN", "")
	c, err := New("")
	if err != nil || c.URL() != DefaultURL || DefaultURL != "http://127.0.0.1:8080" {
		t.Fatalf("New(\"\") without REDLOCK_URL: %v, %v", c, err)
	}
	t.Setenv("REDLOCK_URL", testURL)
	t.Setenv("REDLOCK_TOKEN", testToken)
	c, err = New("")
	if err != nil || c.URL() != testURL {
		t.Fatalf("New(\"\") with REDLOCK_URL: %v, %v", c, err)
	}
	if _, err := c.Status(ctxFor(t, 10*time.Second), lockName(t)); err != nil {
		t.Fatal("a client from the environment (URL and token):", err)
	}
	if _, err := New("", WithToken("wrong-token-0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	c, _ = New("", WithToken("wrong-token-0123456789abcdef"))
	if _, err := c.Status(ctxFor(t, 10*time.Second), lockName(t)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("WithToken did not win over REDLOCK_TOKEN: %v", err)
	}
	c, _ = New(testURL) // an explicit URL: no token from the environment
	if _, err := c.Status(ctxFor(t, 10*time.Second), lockName(t)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("New(url) took REDLOCK_TOKEN: %v", err)
	}
}

// Every call has a deadline for all of it: a server that accepts and never answers, or
// answers one byte at a time, does not hold a call past the client's timeout.
func TestEveryCallHasAWholeCallDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // read the request, then trickle an answer that never ends
				defer conn.Close()
				conn.Read(make([]byte, 4096))
				head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
				for i := 0; ; i++ {
					b := []byte{' '}
					if i < len(head) {
						b = []byte{head[i]}
					}
					if _, err := conn.Write(b); err != nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
	}()
	c, err := New("http://"+ln.Addr().String(), WithTimeout(400*time.Millisecond), WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline of the caller's
	calls := map[string]func() error{
		"Acquire":     func() error { _, err := c.Acquire(ctx, "x", nil); return err },
		"Extend":      func() error { _, err := c.Extend(ctx, "x", NewLease(), 0); return err },
		"Release":     func() error { return c.Release(ctx, "x", NewLease()) },
		"Status":      func() error { _, err := c.Status(ctx, "x"); return err },
		"List":        func() error { _, err := c.List(ctx, "", 0); return err },
		"Lock stream": func() error { _, err := c.Lock(ctx, "x", nil); return err },
		"Lock extend": func() error { _, err := c.Lock(ctx, "x", &LockOptions{KeepAlive: Extend}); return err },
		"Metrics":     func() error { _, err := c.Metrics(ctx); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if err == nil || took > 2*time.Second {
			t.Errorf("%s against a trickling server: %v after %v", name, err, took)
		}
	}
}
