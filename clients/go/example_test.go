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

func ExampleClient_Semaphore() {
	c, err := redlock.New(os.Getenv("REDLOCK_URL"), redlock.WithToken(os.Getenv("REDLOCK_TOKEN")))
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
	c, err := redlock.New(os.Getenv("REDLOCK_URL"), redlock.WithToken(os.Getenv("REDLOCK_TOKEN")))
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
