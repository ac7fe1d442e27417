// fencing_test.go -- the fencing token put to use against a real store: a redis-server
// started by the test (on a Unix socket of its own) is the protected resource, and a Lua
// check-and-set accepts a write only with a token at least the largest it has seen.  A
// holder paused past its validity (its lock expired and taken, through the other
// instance, by another) has its write refused.

package redlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The check-and-set of examples/fencing (tokens compared exactly, as decimal strings).
const fencedSet = `
local last = redis.call('GET', KEYS[1]) or '0'
local tok = ARGV[1]
if #tok < #last or (#tok == #last and tok < last) then
  return redis.error_reply('STALE fencing token ' .. tok .. ' < ' .. last)
end
redis.call('SET', KEYS[1], tok)
redis.call('SET', KEYS[2], ARGV[2])
return 'OK'`

type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// startStore starts a redis-server on a Unix socket in a directory of the test's; it is
// killed at the test's end.
func startStore(t *testing.T) *respConn {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
		"--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal("redis-server:", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var conn net.Conn
	waitFor(t, 10*time.Second, "the store's redis-server", func() bool {
		c, err := net.Dial("unix", sock)
		conn = c
		return err == nil
	})
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(time.Minute))
	return &respConn{conn: conn, r: bufio.NewReader(conn)}
}

func (s *respConn) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(s.conn, b.String()); err != nil {
		return "", err
	}
	line, err := s.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(s.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func (s *respConn) write(name string, token int64, value string) error {
	_, err := s.do("EVAL", fencedSet, "2", "fence:"+name, name, strconv.FormatInt(token, 10), value)
	return err
}

func TestFencingTokenRefusesAPausedHolder(t *testing.T) {
	store := startStore(t)
	name := lockName(t)
	a, b := newClient(t), newClientAt(t, testURLB)
	ctx := ctxFor(t, 30*time.Second)
	sent := time.Now()
	ga, err := a.Acquire(ctx, name, &LockOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.write(name, ga.FencingToken, "A1"); err != nil {
		t.Fatal("A's write while it holds the lock:", err)
	}
	if err := store.write(name, ga.FencingToken, "A2"); err != nil {
		t.Fatal("A's second write with the same token:", err)
	}
	// A pauses: no extension.  B (through the other instance) waits for the lock.
	lb, err := b.Lock(ctx, name, &LockOptions{TTL: 10 * time.Second, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Unlock(ctxFor(t, 10*time.Second))
	if time.Now().Before(sent.Add(ga.Validity)) {
		t.Fatalf("B was granted within A's validity")
	}
	if lb.FencingToken() <= ga.FencingToken {
		t.Fatalf("B's token %d, A's %d", lb.FencingToken(), ga.FencingToken)
	}
	if err := store.write(name, lb.FencingToken(), "B1"); err != nil {
		t.Fatal("B's write:", err)
	}
	// A wakes, still believing it holds the lock: refused.
	err = store.write(name, ga.FencingToken, "A3")
	if err == nil || !strings.HasPrefix(err.Error(), "STALE fencing token") {
		t.Fatalf("the paused holder's write: %v", err)
	}
	if v, err := store.do("GET", name); err != nil || v != "B1" {
		t.Fatalf("the resource holds %q, %v", v, err)
	}
	if err := store.write(name, lb.FencingToken(), "B2"); err != nil {
		t.Fatal("B's second write:", err)
	}
	// Without the check (a plain SET), the late write would have overwritten B's: the
	// check, not the lock, is what refused it.
	if _, err := store.do("SET", name, "A3"); err != nil {
		t.Fatal(err)
	}
	if v, _ := store.do("GET", name); v != "A3" {
		t.Fatalf("a plain SET: %q", v)
	}
}
