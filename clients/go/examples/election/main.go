// examples/election -- leader election: two campaigners, one observer.  node-a leads,
// node-b waits; node-a resigns and node-b leads at once, with a larger fencing token.
//
//	[REDLOCK_URL=http://127.0.0.1:8080] [REDLOCK_TOKEN=...] go run ./examples/election
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"redlockd.local/redlock"
)

func main() {
	c, err := redlock.New("") // REDLOCK_URL, else http://127.0.0.1:8080; REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := &redlock.ElectionOptions{TTL: 5 * time.Second}
	a := c.NewElection("scheduler", opts)
	b := c.NewElection("scheduler", opts)
	leaders := c.NewElection("scheduler", nil).Observe(ctx)

	if err := a.Campaign(ctx, "node-a"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-a leads, term", a.FencingToken())
	l := <-leaders
	fmt.Printf("observed: %s leads, term %d\n", l.Owner, l.FencingToken)

	bLeads := make(chan error, 1)
	go func() { bLeads <- b.Campaign(ctx, "node-b") }() // waits while node-a leads

	// Lead until done, or until leadership is lost: Done() is closed then.
	select {
	case <-a.Done():
		log.Fatal("node-a lost the lead: ", a.Err())
	case <-time.After(2 * time.Second): // the work of a leader
	}
	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-a resigned:", a.Err())
	if err := <-bLeads; err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-b leads, term", b.FencingToken())
	l = <-leaders
	fmt.Printf("observed: %s leads, term %d\n", l.Owner, l.FencingToken)
	if err := b.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = b.Leader(ctx)
	fmt.Println("after node-b resigned:", err)
}
