// example_test.go -- the examples of the documentation, run (and their output checked)
// by go test against the real service.

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"redlockd.local/redlock"
)

func ExampleClient_Lock() {
	c, err := redlock.New("") // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	lock, err := c.Lock(context.Background(), "example/invoices", &redlock.LockOptions{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err) // errors.Is(err, redlock.ErrLockHeld), redlock.ErrQuorumUnavailable, ...
	}
	defer lock.Unlock(context.Background())
	fmt.Println("fencing token", lock.FencingToken())

	_, err = c.Acquire(context.Background(), "example/invoices", nil)
	fmt.Println("held by someone else:", errors.Is(err, redlock.ErrLockHeld))
	fmt.Println("lost:", lock.Context().Err() != nil)
	// Output:
	// fencing token 1
	// held by someone else: true
	// lost: false
}

func ExampleClient_Acquire() {
	c, err := redlock.New("") // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	g, err := c.Acquire(ctx, "example/nightly", &redlock.LockOptions{TTL: 30 * time.Second, Owner: "cron@host-3"})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := c.Status(ctx, "example/nightly")
	fmt.Println(st.Held, st.Owner, st.FencingToken == g.FencingToken)
	if _, err := c.Extend(ctx, "example/nightly", g.Lease, time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Release(ctx, "example/nightly", g.Lease))
	fmt.Println(errors.Is(c.Release(ctx, "example/nightly", g.Lease), redlock.ErrLeaseNotFound))
	// Output:
	// true cron@host-3 true
	// <nil>
	// true
}

func ExampleClient_Semaphore() {
	c, err := redlock.New("") // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.Semaphore(ctx, "example/pool", 2, &redlock.LockOptions{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err) // errors.Is(err, redlock.ErrLockHeld): every permit taken
	}
	fmt.Println("slot's token:", p.FencingToken()%1024 == int64(p.Slot()), "lost:", p.Context().Err() != nil)
	_, err = c.AcquirePermit(ctx, "example/pool", 3, nil)
	var e *redlock.Error
	fmt.Println(errors.Is(err, redlock.ErrPermitsMismatch), errors.As(err, &e) && e.Permits == 2)
	fmt.Println(p.Release(ctx))
	// Output:
	// slot's token: true lost: false
	// true true
	// <nil>
}

func ExampleLockOptions_shared() {
	c, err := redlock.New("") // REDLOCK_URL (else http://127.0.0.1:8080), REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.Lock(ctx, "example/reports", &redlock.LockOptions{Shared: true, KeepAlive: redlock.Extend})
	if err != nil {
		log.Fatal(err)
	}
	g, err := c.Acquire(ctx, "example/reports", &redlock.LockOptions{Shared: true}) // another reader
	fmt.Println("second reader:", err)
	defer c.Release(ctx, "example/reports", g.Lease)
	_, err = c.Acquire(ctx, "example/reports", nil) // a writer
	fmt.Println("writer refused:", errors.Is(err, redlock.ErrLockHeld))
	st, _ := c.Status(ctx, "example/reports")
	fmt.Println("readers:", st.Readers)
	fmt.Println(r.Unlock(ctx))
	// Output:
	// second reader: <nil>
	// writer refused: true
	// readers: 2
	// <nil>
}

func ExampleClient_LockSet() {
	c, err := redlock.New("")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Read the rates, write the ledger: both or neither, whatever order others ask in.
	set, err := c.LockSet(ctx, []string{"example/fx-rates", "example/ledger"},
		&redlock.SetOptions{TTL: 10 * time.Second, Shared: []string{"example/fx-rates"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger token", set.FencingToken("example/ledger"), "rates shared:", set.Shared("example/fx-rates"))
	_, err = c.Acquire(ctx, "example/ledger", nil)
	fmt.Println("ledger held:", errors.Is(err, redlock.ErrLockHeld))
	fmt.Println(set.Unlock(ctx))
	// Output:
	// ledger token 1 rates shared: true
	// ledger held: true
	// <nil>
}

func ExampleElection() {
	c, err := redlock.New("")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	e := c.NewElection("example/scheduler", &redlock.ElectionOptions{TTL: 10 * time.Second})
	if err := e.Campaign(ctx, "host-7"); err != nil { // waits until this one leads
		log.Fatal(err)
	}
	leader, _ := e.Leader(ctx)
	fmt.Println("leader:", leader.Owner, "term:", leader.FencingToken == e.FencingToken())
	select {
	case <-e.Done(): // leadership lost: stop leading (e.Err() says why)
	default: // lead: pass e.FencingToken() to what the leader writes to
	}
	fmt.Println(e.Resign(ctx), e.Err())
	// Output:
	// leader: host-7 term: true
	// <nil> redlock: lock unlocked
}
