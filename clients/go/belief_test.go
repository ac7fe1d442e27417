// belief_test.go -- issue 29: a holder's belief never outlives the lock.  A client holds a
// lock through the fault relay in front of instance A (a delay or a trickle on the
// service-to-client direction); A is SIGSTOPped (a VM pause) as soon as the client has the
// lock; a second client polls instance B until it is granted.  The first client must have
// signalled the loss (Context() cancelled) before the second client sent the acquire that
// was granted.

package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// relay sends one command to the fault relay's control port ("delay down 800", "reset").
func relay(t *testing.T, cmd string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", relayControl, 5*time.Second)
	if err != nil {
		t.Fatalf("relay control: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
		t.Fatalf("relay %q: %v", cmd, err)
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(answer) != "ok" {
		t.Fatalf("relay %q: %q, %v", cmd, answer, err)
	}
}

// useRelay resets the relay now and at the test's end.
func useRelay(t *testing.T) {
	t.Helper()
	relay(t, "reset")
	t.Cleanup(func() { relay(t, "reset") })
}

// waitReady waits until the instance at url answers /readyz with 200.
func waitReady(t *testing.T, url string) {
	t.Helper()
	waitFor(t, 30*time.Second, url+"/readyz to answer 200", func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// pauseInstanceA stops the first instance with SIGSTOP; the returned resume (also run at
// the test's end) continues it and waits until it is ready again.
func pauseInstanceA(t *testing.T) (resume func()) {
	t.Helper()
	paused := true
	resume = func() {
		if !paused {
			return
		}
		paused = false
		if err := syscall.Kill(servicePIDs[0], syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT instance A: %v", err)
		}
		waitReady(t, testURL)
	}
	t.Cleanup(resume)
	if err := syscall.Kill(servicePIDs[0], syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP instance A: %v", err)
	}
	return resume
}

// beliefCase is one run: a keep-alive, the relay's service-to-client delay, and a
// trickle (one byte every so often) switched on once the lock is held.
type beliefCase struct {
	mode    KeepAlive
	delay   time.Duration
	trickle time.Duration
	pause   bool // SIGSTOP instance A once the lock is held
}

func (bc beliefCase) String() string {
	s := fmt.Sprintf("%v/delay_%dms", bc.mode, bc.delay.Milliseconds())
	if bc.trickle > 0 {
		s += fmt.Sprintf("/trickle_%dms", bc.trickle.Milliseconds())
	}
	if !bc.pause {
		s += "/no_pause"
	}
	return s
}

// runBelief holds a lock through the relay, makes it lose the lock (A paused, or the
// answers trickling), and checks that the loss was signalled before a client of B was
// granted the lock.  It returns the margin: from the loss signal to the send of B's
// granted acquire (at least; the grant itself came later).
func runBelief(t *testing.T, bc beliefCase) time.Duration {
	useRelay(t)
	name := lockName(t)
	ttl := 3 * time.Second
	if bc.delay > 0 {
		relay(t, fmt.Sprintf("delay down %d", bc.delay.Milliseconds()))
	}
	a, err := New(relayURL, WithToken(testToken))
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Lock(ctxFor(t, 20*time.Second), name, &LockOptions{TTL: ttl, KeepAlive: bc.mode})
	if err != nil {
		t.Fatal("lock through the relay:", err)
	}
	t.Cleanup(func() { // before A resumes, with the relay back to normal
		relay(t, "reset")
		l.Unlock(ctxFor(t, 10*time.Second))
	})
	lostAt := make(chan time.Time, 1)
	go func() { <-l.Context().Done(); lostAt <- time.Now() }()
	if bc.trickle > 0 {
		relay(t, fmt.Sprintf("trickle down %d", bc.trickle.Milliseconds()))
	}
	if bc.pause {
		pauseInstanceA(t)
	}
	held := time.Now()
	b := newClientAt(t, testURLB)
	var granted *Grant
	var sent time.Time
	lostBeforeSend := false
	for deadline := time.Now().Add(30 * time.Second); granted == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("B was not granted %s within 30 s (A's client: %v)", name, l.Err())
		}
		lostBeforeSend = l.Context().Err() != nil
		sent = time.Now()
		g, err := b.Acquire(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: 10 * time.Second})
		switch {
		case err == nil:
			granted = g
		case errors.Is(err, ErrLockHeld), errors.Is(err, ErrLockContended), errors.Is(err, ErrQuorumUnavailable):
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatal("B's acquire:", err)
		}
	}
	t.Cleanup(func() { b.Release(context.Background(), name, granted.Lease) })
	if granted.FencingToken <= l.FencingToken() {
		t.Errorf("B's token %d is not larger than A's %d", granted.FencingToken, l.FencingToken())
	}
	if !lostBeforeSend {
		select {
		case at := <-lostAt:
			t.Fatalf("%v: B was granted (acquire sent %v after A's client had the lock) while A's client "+
				"still believed it held it: the loss came %v after B's acquire was sent",
				bc, sent.Sub(held), at.Sub(sent))
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: B was granted while A's client still believed it held it, and no loss "+
				"signal came within 10 s after", bc)
		}
	}
	at := <-lostAt
	margin := sent.Sub(at)
	var le *LostError
	if !errors.As(l.Err(), &le) {
		t.Errorf("Err after the loss: %v", l.Err())
	}
	t.Logf("belief %v: loss (%s) signalled %v after the lock was held; B's granted acquire sent %v later (margin)",
		bc, le.Reason, at.Sub(held).Round(time.Millisecond), margin.Round(time.Millisecond))
	return margin
}

// newClientAt is a client of url with the stack's token.
func newClientAt(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	c, err := New(url, append([]Option{WithToken(testToken)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Finding 2: a streamed hold through a relay that delays what the service sends by 0,
// 0.15 and 0.8 s; instance A paused as soon as the lock is held.
func TestStreamedHoldBeliefNeverOutlivesTheLock(t *testing.T) {
	for _, d := range []time.Duration{0, 150 * time.Millisecond, 800 * time.Millisecond} {
		bc := beliefCase{mode: Stream, delay: d, pause: true}
		t.Run(bc.String(), func(t *testing.T) { runBelief(t, bc) })
	}
	// The service's answers trickled (a byte every 50 ms) once the lock is held, then A
	// paused: a line half read must not count.
	bc := beliefCase{mode: Stream, trickle: 50 * time.Millisecond, pause: true}
	t.Run(bc.String(), func(t *testing.T) { runBelief(t, bc) })
}

// Finding 3 (and the same delays): a lock kept by extensions.  With the trickle, A is not
// paused: its answers to the PATCHes cannot be read within the validity, and the client
// must give the lock up by its own timer.
func TestExtendedHoldBeliefNeverOutlivesTheLock(t *testing.T) {
	for _, d := range []time.Duration{0, 150 * time.Millisecond, 800 * time.Millisecond} {
		bc := beliefCase{mode: Extend, delay: d, pause: true}
		t.Run(bc.String(), func(t *testing.T) { runBelief(t, bc) })
	}
	bc := beliefCase{mode: Extend, trickle: 50 * time.Millisecond}
	t.Run(bc.String(), func(t *testing.T) { runBelief(t, bc) })
}
