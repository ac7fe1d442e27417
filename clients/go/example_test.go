// example_test.go -- the examples of the documentation, run (and their output checked)
// by go test against the real service.

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"redlockd.local/redlock"
)

func ExampleClient_Lock() {
	c, err := redlock.New(os.Getenv("REDLOCK_URL"), redlock.WithToken(os.Getenv("REDLOCK_TOKEN")))
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
	c, err := redlock.New(os.Getenv("REDLOCK_URL"), redlock.WithToken(os.Getenv("REDLOCK_TOKEN")))
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
