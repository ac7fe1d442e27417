// helpers_test.go -- the stack the tests run against (clients/stack.py's environment),
// and waiting on conditions with deadlines.

package redlock

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	testURL     string
	testToken   string
	masterPIDs  []int
	masterPorts []int

	// The second instance, the instances' PIDs, and the fault relay in front of the
	// first (clients/stack.py; the tests of issue 29 use them).
	testURLB     string
	servicePIDs  []int
	relayURL     string
	relayControl string
)

func TestMain(m *testing.M) {
	testURL = os.Getenv("REDLOCK_URL")
	testToken = os.Getenv("REDLOCK_TEST_TOKEN")
	for _, s := range strings.Split(os.Getenv("REDLOCK_TEST_MASTER_PIDS"), ",") {
		if n, err := strconv.Atoi(s); err == nil {
			masterPIDs = append(masterPIDs, n)
		}
	}
	for _, s := range strings.Split(os.Getenv("REDLOCK_TEST_MASTER_PORTS"), ",") {
		if n, err := strconv.Atoi(s); err == nil {
			masterPorts = append(masterPorts, n)
		}
	}
	for _, s := range strings.Split(os.Getenv("REDLOCK_TEST_SERVICE_PIDS"), ",") {
		if n, err := strconv.Atoi(s); err == nil {
			servicePIDs = append(servicePIDs, n)
		}
	}
	testURLB = os.Getenv("REDLOCK_URL_B")
	relayURL = os.Getenv("REDLOCK_TEST_RELAY_URL")
	relayControl = os.Getenv("REDLOCK_TEST_RELAY_CONTROL")
	if testURL == "" || testToken == "" || len(masterPIDs) != 5 || testURLB == "" ||
		len(servicePIDs) != 2 || relayURL == "" || relayControl == "" {
		fmt.Fprintln(os.Stderr, "these tests need a redlockd stack: run them with "+
			"`python3 clients/stack.py -- clients/go/test.sh` (REDLOCK_URL, "+
			"REDLOCK_TEST_TOKEN, REDLOCK_TEST_MASTER_PIDS, REDLOCK_URL_B, "+
			"REDLOCK_TEST_SERVICE_PIDS or REDLOCK_TEST_RELAY_* are unset)")
		os.Exit(2)
	}
	if os.Getenv("REDLOCK_TOKEN") == "" { // what the examples read, as bin/redlock does
		os.Setenv("REDLOCK_TOKEN", testToken)
	}
	os.Exit(m.Run())
}

// newClient is a client of the stack with its token.
func newClient(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(testURL, append([]Option{WithToken(testToken)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._:/-]`)

// lockName is a lock name of the test's own.
func lockName(t *testing.T) string {
	return "go/" + unsafeChars.ReplaceAllString(t.Name(), "_")
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it is true; fails the test at the deadline.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric reads one unlabelled metric of the service's /metrics.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(testURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return v
		}
	}
	t.Fatalf("no metric %s in /metrics", name)
	return 0
}

// waitParked waits until n acquirers are parked in the service.
func waitParked(t *testing.T, n float64) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%v parked waiters", n), func() bool {
		return metric(t, "redlockd_parked_waiters") == n
	})
}

// freeze stops the first n masters with SIGSTOP; the returned thaw (also run at the
// test's end, whatever happens) continues them and waits until the service uses all
// five again.
func freeze(t *testing.T, n int) (thaw func()) {
	t.Helper()
	frozen := true
	thaw = func() {
		if !frozen {
			return
		}
		frozen = false
		for _, pid := range masterPIDs[:n] {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %d: %v", pid, err)
			}
		}
		waitAllMastersReady(t)
	}
	t.Cleanup(thaw)
	for _, pid := range masterPIDs[:n] {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
	}
	return thaw
}

// waitAllMastersReady waits until both instances use all five masters again: each
// worker thread has its own connection to each master, and a thawed master may take a
// worker's connection down (and back) after /readyz already answered from another
// worker; so /healthz (each connection's state) must show all five ready ten times in a
// row, each asked on a new connection (the kernel spreads them over the workers).
func waitAllMastersReady(t *testing.T) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	allReady := func(url string) bool {
		resp, err := hc.Get(url + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct {
			Masters []struct {
				OK    bool   `json:"ok"`
				State string `json:"state"`
			} `json:"masters"`
		}
		if json.NewDecoder(resp.Body).Decode(&h) != nil || len(h.Masters) != len(masterPIDs) {
			return false
		}
		for _, m := range h.Masters {
			if !m.OK || m.State != "ready" {
				return false
			}
		}
		return true
	}
	for _, url := range []string{testURL, testURLB} {
		inARow := 0
		waitFor(t, 30*time.Second, "all masters ready at "+url, func() bool {
			if allReady(url) {
				inARow++
			} else {
				inARow = 0
			}
			return inARow >= 10
		})
	}
}

// mustStatus is Status that fails the test on an error.
func mustStatus(t *testing.T, c *Client, name string) *State {
	t.Helper()
	s, err := c.Status(ctxFor(t, 10*time.Second), name)
	if err != nil {
		t.Fatalf("status %s: %v", name, err)
	}
	return s
}
