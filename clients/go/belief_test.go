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
	"sort"
	"strconv"
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
		waitAllMastersReady(t) // every worker's connections, not only the one /readyz asked
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
// granted the lock.  It returns the margin: from the loss signal to a moment known to
// precede B's grant (the later of its request's send and the keys' expiry on a quorum),
// a lower bound on the true margin.
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
	held := time.Now()
	if bc.trickle > 0 {
		relay(t, fmt.Sprintf("trickle down %d", bc.trickle.Milliseconds()))
	}
	// B's grant comes after the send of its request, and after the lock's keys have
	// expired on a quorum of masters: once A is frozen nobody extends them, and their
	// PTTL bounds that moment from below (B's round may run well after its send on a busy
	// machine, so the send alone would be too early a bound).
	expiry := time.Time{}
	if bc.pause {
		pauseInstanceA(t)
		time.Sleep(200 * time.Millisecond) // what A had written has landed
		expiry = quorumExpiry(t, "redlock:"+name)
	}
	b := newClientAt(t, testURLB)
	var granted *Grant
	var sent time.Time
	for deadline := time.Now().Add(30 * time.Second); granted == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("B was not granted %s within 30 s (A's client: %v)", name, l.Err())
		}
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
	grantAfter := sent // a moment known to precede B's grant
	if expiry.After(grantAfter) {
		grantAfter = expiry
	}
	waitFor(t, 10*time.Second, "A's client to signal the loss", func() bool { return l.Err() != nil })
	l.mu.Lock()
	at := l.lostAt
	l.mu.Unlock()
	margin := grantAfter.Sub(at)
	if margin <= 0 {
		t.Fatalf("%v: B was granted while A's client still believed it held the lock: the loss was "+
			"signalled %v after B's grant (B's acquire sent %v after A's client had the lock, the keys' "+
			"quorum expiry %v after)", bc, -margin, sent.Sub(held), expiry.Sub(held))
	}
	var le *LostError
	if !errors.As(l.Err(), &le) {
		t.Errorf("Err after the loss: %v", l.Err())
	}
	t.Logf("belief %v: loss (%s) signalled %v after the lock was held (%v after the timer's time), %v before B's grant (margin)",
		bc, le.Reason, at.Sub(held).Round(time.Millisecond),
		at.Sub(l.Deadline().Add(-l.margin())).Round(time.Millisecond), margin.Round(time.Millisecond))
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

// quorumExpiry is a moment before which key cannot have expired on a quorum of masters
// (nobody extending it): from each master's PTTL, read by hand in RESP.
func quorumExpiry(t *testing.T, key string) time.Time {
	t.Helper()
	var ends []time.Time
	far := time.Now().Add(time.Hour)
	for _, port := range masterPorts {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		at := time.Now()
		fmt.Fprintf(c, "*2\r\n$4\r\nPTTL\r\n$%d\r\n%s\r\n", len(key), key)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		n, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, ":")), 10, 64)
		if err != nil || perr != nil {
			t.Fatalf("PTTL %s on %d: %q, %v", key, port, line, err)
		}
		switch {
		case n == -2: // no key there
			ends = append(ends, time.Time{})
		case n < 0:
			ends = append(ends, far)
		default:
			ends = append(ends, at.Add(time.Duration(n)*time.Millisecond))
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	return ends[len(ends)/2]
}
