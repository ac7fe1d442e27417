// examples/shared -- readers beside readers, a writer refused; a semaphore of 2.
//
//	[REDLOCK_URL=http://127.0.0.1:8080] [REDLOCK_TOKEN=...] go run ./examples/shared
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"redlockd.local/redlock"
)

func main() {
	url := os.Getenv("REDLOCK_URL")
	if url == "" {
		url = "http://127.0.0.1:8080" // make run's, as in the other clients' examples
	}
	c, err := redlock.New(url, redlock.WithToken(os.Getenv("REDLOCK_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		r, err := c.Lock(ctx, "reports", &redlock.LockOptions{Shared: true})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Unlock(ctx)
	}
	st, _ := c.Status(ctx, "reports")
	_, err = c.Acquire(ctx, "reports", nil)
	fmt.Printf("readers %d; a writer: lock held? %v\n", st.Readers, errors.Is(err, redlock.ErrLockHeld))

	a, err := c.Semaphore(ctx, "pool/db", 2, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := c.Semaphore(ctx, "pool/db", 2, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("permits in slots %d and %d, tokens %d and %d\n", a.Slot(), b.Slot(), a.FencingToken(), b.FencingToken())
	_, err = c.AcquirePermit(ctx, "pool/db", 2, nil)
	fmt.Println("a third permit: lock held?", errors.Is(err, redlock.ErrLockHeld))
	_, err = c.AcquirePermit(ctx, "pool/db", 3, nil)
	var e *redlock.Error
	if errors.Is(err, redlock.ErrPermitsMismatch) && errors.As(err, &e) {
		fmt.Println("permits 3: mismatch, in use:", e.Permits)
	}
	b.Release(ctx)
	s, _ := c.SemaphoreStatus(ctx, "pool/db")
	fmt.Printf("after one release: %+v\n", *s)
}
