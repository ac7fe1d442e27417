// examples/lock -- take a lock, keep it while working, give it up.
//
//	[REDLOCK_URL=http://127.0.0.1:8080] [REDLOCK_TOKEN=...] go run ./examples/lock
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

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
	lock, err := c.Lock(ctx, "reports/daily", &redlock.LockOptions{
		TTL: 3 * time.Second, Wait: 5 * time.Second, Owner: "the example"})
	if err != nil {
		log.Fatal(err) // errors.Is(err, redlock.ErrLockHeld), redlock.ErrQuorumUnavailable, ...
	}
	fmt.Println("locked reports/daily with fencing token", lock.FencingToken())

	// Anyone else is refused (or waits, with Wait) while the lock is kept.
	_, err = c.Acquire(ctx, "reports/daily", nil)
	fmt.Println("another acquire: lock held?", errors.Is(err, redlock.ErrLockHeld))

	// Work for two ttls: the service extends the lock; the work stops if it is lost.
	select {
	case <-lock.Context().Done():
		log.Fatal(lock.Err()) // errors.Is(lock.Err(), redlock.ErrLockLost)
	case <-time.After(6 * time.Second):
	}
	st, err := c.Status(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after 6 s: held %v by %q, token %d\n", st.Held, st.Owner, st.FencingToken)

	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	st, _ = c.Status(ctx, "reports/daily")
	fmt.Println("unlocked: held", st.Held)
}
