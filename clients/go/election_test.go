// election_test.go -- Election against the real service: campaign, a second campaigner
// waiting, resign and the handover, Leader and Observe, the loss when three masters
// freeze (Done closed before the validity ends), a cancelled campaign.

package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestElection(t *testing.T) {
	c, name := newClient(t), lockName(t)
	ctx := ctxFor(t, 60*time.Second)
	ttl := 2 * time.Second
	e1 := c.NewElection(name, &ElectionOptions{TTL: ttl})
	e2 := c.NewElection(name, &ElectionOptions{TTL: ttl})
	watcher := c.NewElection(name, nil)
	if _, err := watcher.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v", err)
	}
	if e1.IsLeader() || !errors.Is(e1.Err(), ErrNotLeader) || e1.FencingToken() != 0 || e1.Key() != name {
		t.Fatal("a new campaigner says it leads")
	}
	select {
	case <-e1.Done():
	default:
		t.Fatal("Done of a campaigner that does not lead is not closed")
	}
	if err := e1.Campaign(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	defer e1.Resign(context.Background())
	if !e1.IsLeader() || e1.Err() != nil || e1.FencingToken() < 1 {
		t.Fatalf("after the campaign: leader %v err %v token %d", e1.IsLeader(), e1.Err(), e1.FencingToken())
	}
	if err := e1.Campaign(ctx, "node-1"); err != nil {
		t.Fatal("a second campaign of the leader:", err)
	}
	ld, err := watcher.Leader(ctx)
	if err != nil || ld.Owner != "node-1" || ld.FencingToken != e1.FencingToken() {
		t.Fatalf("Leader: %+v, %v", ld, err)
	}
	obs := watcher.Observe(ctx)
	if l := <-obs; l.Owner != "node-1" || l.FencingToken != e1.FencingToken() {
		t.Fatalf("Observe's first leader: %+v", l)
	}
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "node-2") }()
	waitParked(t, 1)
	if e2.IsLeader() {
		t.Fatal("two leaders")
	}
	if err := e1.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal("resign:", err)
	}
	select {
	case <-e1.Done():
	default:
		t.Fatal("Done not closed by Resign")
	}
	if !errors.Is(e1.Err(), ErrUnlocked) {
		t.Fatalf("Err after Resign: %v", e1.Err())
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal("the second campaign:", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second campaigner did not lead within 5 s of the resignation")
	}
	defer e2.Resign(context.Background())
	if e2.FencingToken() <= e1.FencingToken() {
		t.Fatalf("the second term's token %d, the first's %d", e2.FencingToken(), e1.FencingToken())
	}
	select {
	case l := <-obs:
		if l.Owner != "node-2" || l.FencingToken != e2.FencingToken() {
			t.Fatalf("Observe's second leader: %+v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe did not see the second leader within 5 s")
	}
	// A campaign while another leads ends with its ctx.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = e1.Campaign(cctx, "node-1")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || e1.IsLeader() {
		t.Fatalf("a campaign whose ctx ends: %v", err)
	}
	// The leader's lock cannot be kept: it steps down before its validity ends.
	thaw := freeze(t, 3)
	select {
	case <-e2.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("the leader did not step down after three masters froze")
	}
	if !errors.Is(e2.Err(), ErrLockLost) {
		t.Fatalf("Err after the loss: %v", e2.Err())
	}
	thaw()
	if err := e2.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal("resign after the loss:", err)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after the last leader lost and resigned: %v", err)
	}
}
