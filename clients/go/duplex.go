// duplex.go -- the duplex streamed hold (docs/DESIGN.md section 10): POST ...?hold=stream
// with "Connection: Upgrade" and "Upgrade: redlock-hold", answered 101; then one JSON
// object per line both ways.  The service's first line is the grant (its validity counts
// from the send of the request); the client pings ({"ping":n}) right away and then every
// ping_ms, never while the answer to the previous ping is unread; each answer
// {"event":"alive","ping":n,"validity_ms":v} proves the lock held until the ping's send
// + v.  {"release":true} releases it.  Any other line, the stream's end, or the local
// timer at the latest proven end (less a margin) ends the belief.
//
// Three goroutines per hold: the reader (lines, as they come), the writer (so that no
// write can hold up the keeper), and the keeper (pings, answers, the end).  The loss
// timer is Lock's own (time.AfterFunc).

package redlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// duplex is the connection of a streamed hold.
type duplex struct {
	rwc       io.ReadWriteCloser
	br        *bufio.Reader
	out       chan []byte   // lines for the writer
	closed    chan struct{} // closed by close()
	closeOnce sync.Once
	pingEvery time.Duration

	// What the service said last, for Unlock: "requested" (a released line answering
	// our release), or the reason of a lost line, or "" (no last line read).
	mu    sync.Mutex
	final string
}

func (d *duplex) close() {
	d.closeOnce.Do(func() {
		close(d.closed)
		d.rwc.Close()
	})
}

// send queues a line for the writer; it never blocks (a writer stuck on a dead link
// has the hold lost by the timer, not by this).
func (d *duplex) send(line string) {
	select {
	case d.out <- []byte(line):
	default:
	}
}

func (d *duplex) writer() {
	for {
		select {
		case <-d.closed:
			return
		case b := <-d.out:
			if _, err := d.rwc.Write(b); err != nil {
				d.close() // the reader sees the end, and the keeper with it
				return
			}
		}
	}
}

type streamLine struct {
	b   []byte
	err error
}

// reader passes each line on as it is read; at most 4 KiB a line.
func (d *duplex) reader(lines chan<- streamLine) {
	for {
		b, err := d.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			err = errors.New("a line longer than 4 KiB")
		}
		ln := streamLine{b: append([]byte(nil), b...), err: err}
		select {
		case lines <- ln:
		case <-d.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

func (d *duplex) setFinal(s string) {
	d.mu.Lock()
	if d.final == "" {
		d.final = s
	}
	d.mu.Unlock()
}

func (d *duplex) finalLine() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.final
}

// holdEvent is a line of the service after the grant.
type holdEvent struct {
	Event      string `json:"event"`
	Ping       *int64 `json:"ping"`
	ValidityMs int64  `json:"validity_ms"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
}

// closeOnDone closes c if ctx ends before the returned stop is called; stop says
// whether it did not (true: c is still open because of ctx).
func closeOnDone(ctx context.Context, c io.Closer) (stop func() bool) {
	done := make(chan struct{})
	closed := make(chan bool, 1)
	go func() {
		select {
		case <-ctx.Done():
			c.Close()
			closed <- true
		case <-done:
			closed <- false
		}
	}()
	return func() bool { close(done); return !<-closed }
}

// holdStream acquires t with a duplex streamed hold and starts keeping it.
func (c *Client) holdStream(ctx context.Context, t target, o *LockOptions) (*Lock, *wireGrant, error) {
	lease := o.Lease
	generated := lease == ""
	if generated {
		lease = newLease()
	}
	op := "lock " + t.name
	if t.permits != 0 {
		op = "semaphore " + t.name
	}
	// The request, the 101 and the grant line within ctx and Wait + the timeout.
	actx, cancel := c.callCtx(ctx, o.Wait)
	defer cancel()
	req, err := c.newRequest(actx, http.MethodPost, t.path, acquireBody(t, o, lease, o.Wait, true))
	if err != nil {
		return nil, nil, fmt.Errorf("redlock: %s: %w", op, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "redlock-hold")
	req.Header.Set("Accept", "application/json, application/x-ndjson")
	// abandon: the attempt may have been granted with no answer read.  Its connection is
	// closed (the service drops a waiter at once, and lets a grant go once its validity is
	// over), and a lease of our making is released at once by a DELETE in the background.
	abandon := func() {
		if generated && !o.Reentrant {
			go func() {
				rctx, rcancel := context.WithTimeout(context.Background(), c.timeout)
				defer rcancel()
				c.release(rctx, t, lease, "")
			}()
		}
	}
	fail := func(err error) (*Lock, *wireGrant, error) {
		abandon()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("redlock: %s: %w", op, ctx.Err())
		}
		if actx.Err() != nil {
			return nil, nil, fmt.Errorf("redlock: %s: no grant within %v: %w", op,
				o.Wait+c.timeout, context.DeadlineExceeded)
		}
		return nil, nil, err
	}
	sent := time.Now() // precedes the round: the grant's validity counts from here
	resp, err := c.hc.Do(req)
	if err != nil {
		return fail(fmt.Errorf("redlock: %s: %w", op, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			// A one-way stream (a service without the duplex mode): closing it releases.
			return nil, nil, fmt.Errorf("redlock: %s: the service answered HTTP %d, not 101: it does not know the duplex hold (Upgrade: redlock-hold)", op, resp.StatusCode)
		}
		return nil, nil, errorOf(op, resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return fail(fmt.Errorf("redlock: %s: the HTTP client gave no connection with the 101", op))
	}
	// After the 101 the connection is ours: net/http no longer watches the request's ctx.
	stop := closeOnDone(actx, rwc)
	d := &duplex{rwc: rwc, br: bufio.NewReaderSize(rwc, 4096), out: make(chan []byte, 4),
		closed: make(chan struct{})}
	line, err := d.br.ReadSlice('\n')
	if !stop() {
		return fail(fmt.Errorf("redlock: %s: reading the grant: %w", op, context.DeadlineExceeded))
	}
	if err != nil {
		rwc.Close()
		return fail(fmt.Errorf("redlock: %s: reading the grant: %w", op, err))
	}
	var w wireGrant
	g, err := (*Grant)(nil), json.Unmarshal(line, &w)
	if err == nil {
		g, err = w.grant()
	}
	if err != nil {
		rwc.Close()
		return fail(fmt.Errorf("redlock: %s: the grant %q: %w", op, line, err))
	}
	l := c.newLock(t, g, Stream, sent.Add(g.Validity), o)
	l.hold = d
	d.pingEvery = ms(w.PingMs)
	if d.pingEvery <= 0 {
		d.pingEvery = l.ttl / 4
	}
	confirmed := make(chan struct{})
	lines := make(chan streamLine)
	go d.reader(lines)
	go d.writer()
	go l.duplexLoop(d, lines, confirmed)
	// After a long wait little or none of the grant's validity (counted from the
	// request's send) may be left: the first answer to a ping (sent at once; the service
	// answers it once its first extension of the hold has succeeded) then confirms it,
	// from that ping's send on, or the hold is given up.  Nothing is believed meanwhile:
	// the Lock is not returned and its timer not set until then.
	if time.Since(sent) > g.Validity/3 {
		select {
		case <-confirmed:
		case <-l.ctx.Done():
		case <-actx.Done():
		}
		if l.Err() != nil || actx.Err() != nil || !isClosed(confirmed) {
			err := l.Err()
			if err == nil {
				err = actx.Err()
			}
			uctx, ucancel := context.WithTimeout(context.Background(), c.timeout)
			l.Unlock(uctx)
			ucancel()
			return nil, nil, fmt.Errorf("redlock: %s: the grant came after a wait and could not be confirmed: %w", op, err)
		}
	}
	l.armLossTimer()
	return l, &w, nil
}

// duplexLoop is the keeper of a streamed hold: it pings, reads the answers, proves the
// validity each one carries (from its ping's send), and ends the hold: at a line other
// than alive, at the stream's end, or when the belief has ended (the loss timer, Unlock),
// by sending {"release":true} and waiting (at most the client's timeout) for the
// service's last line.
func (l *Lock) duplexLoop(d *duplex, lines <-chan streamLine, confirmed chan<- struct{}) {
	defer close(l.done)
	defer d.close()
	var n int64
	var pingSent time.Time
	waiting := false // a ping is unanswered: the next waits for its answer
	ping := func() {
		n++
		pingSent = time.Now() // before the write: it precedes the service's read of it
		waiting = true
		d.send(fmt.Sprintf("{\"ping\":%d}\n", n))
	}
	pingTimer := time.NewTimer(time.Hour)
	pingTimer.Stop()
	defer pingTimer.Stop()
	ping()
	for {
		select {
		case <-l.ctx.Done(): // lost by the timer, or unlocked: let the service release it
			l.endHold(d, lines)
			return
		case <-pingTimer.C:
			if !waiting {
				ping()
			}
		case ln := <-lines:
			if ln.err != nil {
				l.lose("stream_ended", ln.err)
				return
			}
			var ev holdEvent
			if err := json.Unmarshal(ln.b, &ev); err != nil {
				if len(trimLine(ln.b)) == 0 {
					continue // an empty line
				}
				l.lose("bad_line", fmt.Errorf("the service's line %q: %w", trimLine(ln.b), err))
				l.endHold(d, lines)
				return
			}
			switch ev.Event {
			case "alive":
				if !waiting || ev.Ping == nil || *ev.Ping != n || ev.ValidityMs <= 0 {
					continue // not the answer to the ping in flight: it proves nothing
				}
				waiting = false
				l.prove(pingSent.Add(ms(ev.ValidityMs)))
				if confirmed != nil {
					close(confirmed)
					confirmed = nil
				}
				pingTimer.Reset(time.Until(pingSent.Add(d.pingEvery)))
			case "released":
				d.setFinal("released")
				var err error
				if ev.Reason != "" {
					err = errors.New("the service released it: " + ev.Reason)
				}
				l.lose("released", err)
				return
			case "lost":
				reason := ev.Reason
				if reason == "" {
					reason = "lost"
				}
				d.setFinal(reason)
				var err error
				if ev.Message != "" {
					err = errors.New(ev.Message)
				}
				l.lose(reason, err)
				l.endHold(d, lines) // the service lets go at our release (or at told_until)
				return
			default:
				l.lose("bad_line", fmt.Errorf("the service's line %q", trimLine(ln.b)))
				l.endHold(d, lines)
				return
			}
		}
	}
}

// endHold sends {"release":true} and reads until the service's last line or the
// stream's end, for at most the client's timeout (Unlock's ctx may close it sooner).
func (l *Lock) endHold(d *duplex, lines <-chan streamLine) {
	d.send("{\"release\":true}\n")
	t := time.NewTimer(l.c.timeout)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-d.closed:
			return
		case ln := <-lines:
			if ln.err != nil {
				return
			}
			var ev holdEvent
			if json.Unmarshal(ln.b, &ev) != nil {
				continue
			}
			switch ev.Event {
			case "released":
				d.setFinal("requested")
				return
			case "lost":
				d.setFinal(ev.Reason)
				// after lost the service only releases (at our release) and closes
			}
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func trimLine(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// unlockStream ends a streamed hold: the keeper sends {"release":true} (the belief
// ended when Unlock cancelled Context) and reads the service's last line.
func (l *Lock) unlockStream(ctx context.Context, lost error) error {
	select {
	case <-l.done:
	case <-ctx.Done():
		l.hold.close()
		<-l.done
	}
	final := l.hold.finalLine()
	if lost == nil && final == "requested" {
		return nil // released by a round that reached a quorum
	}
	if lost != nil && !l.needsRelease(lost) {
		return lost
	}
	if lost == nil && final == "no_quorum" && l.reentrant {
		return &Error{Op: "unlock " + l.name, Code: ErrQuorumUnavailable,
			Message: "the release reached no quorum of masters: the lock expires by itself within its ttl"}
	}
	if lost == nil && l.reentrant {
		// No last line: the service lets the hold go when the validity it last told
		// has run out; a DELETE here could take back another hold of the lease.
		return &Error{Op: "unlock " + l.name, Code: ErrClientClosed,
			Message: "no answer to the release: the service lets the hold go once the validity it told has run out"}
	}
	if lost != nil && final == "requested" {
		return lost // our release after the loss was carried out
	}
	// The release was not confirmed (no quorum, no answer, the stream gone): a DELETE
	// with the lease, through any connection, frees what some masters may still hold.
	_, err := l.releaseFn(ctx)
	switch {
	case lost != nil:
		return lost
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseNotFound):
		if final == "no_quorum" {
			return nil // the service's own release round did reach the masters in the end
		}
		return &LostError{Name: l.name, Reason: "lease_lost", Err: err}
	}
	return err
}
