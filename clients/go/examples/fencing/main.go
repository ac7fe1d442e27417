// examples/fencing -- the fencing token put to use: a resource (a redis-server this
// example starts, on a Unix socket of its own) accepts a write only with a token at least
// the largest it has seen (a Lua check-and-set), so a holder that paused past its lock's
// validity, while another took the lock, has its write refused.
//
//	[REDLOCK_URL=http://127.0.0.1:8080] [REDLOCK_TOKEN=...] go run ./examples/fencing
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"redlockd.local/redlock"
)

// fencedSet writes ARGV[2] to KEYS[2] only if the token ARGV[1] is at least the largest
// one written so far (kept in KEYS[1]); tokens are compared as decimal strings, exactly.
const fencedSet = `
local last = redis.call('GET', KEYS[1]) or '0'
local tok = ARGV[1]
if #tok < #last or (#tok == #last and tok < last) then
  return redis.error_reply('STALE fencing token ' .. tok .. ' < ' .. last)
end
redis.call('SET', KEYS[1], tok)
redis.call('SET', KEYS[2], ARGV[2])
return 'OK'`

// store is a connection to the protected resource, speaking RESP by hand.
type store struct {
	conn net.Conn
	r    *bufio.Reader
}

func (s *store) do(args ...string) (string, error) {
	b := []byte(fmt.Sprintf("*%d\r\n", len(args)))
	for _, a := range args {
		b = append(b, fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)...)
	}
	if _, err := s.conn.Write(b); err != nil {
		return "", err
	}
	line, err := s.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = line[:len(line)-2]
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

// write is the protected operation: the value, with the writer's fencing token.
func (s *store) write(token int64, value string) error {
	_, err := s.do("EVAL", fencedSet, "2", "fence:orders/42", "orders/42", strconv.FormatInt(token, 10), value)
	return err
}

func result(err error) string {
	if err != nil {
		return "refused: " + err.Error()
	}
	return "ok"
}

func main() {
	dir, err := os.MkdirTemp("", "fencing-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "redis.sock")
	rs := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := rs.Start(); err != nil {
		log.Fatal("redis-server: ", err)
	}
	defer func() { rs.Process.Kill(); rs.Wait() }()
	var conn net.Conn
	for i := 0; conn == nil; i++ {
		if conn, err = net.Dial("unix", sock); err != nil && i > 100 {
			log.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := &store{conn: conn, r: bufio.NewReader(conn)}

	c, err := redlock.New("") // REDLOCK_URL, else http://127.0.0.1:8080; REDLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// A takes the lock for 1 s and writes with its token.
	a, err := c.Acquire(ctx, "orders/42", &redlock.LockOptions{TTL: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("A holds orders/42 with fencing token %d; writes: %s\n", a.FencingToken, result(res.write(a.FencingToken, "written by A")))

	// A pauses (a GC pause, a stopped VM): its lock expires, B takes it and writes.
	fmt.Println("A pauses; its lock expires")
	b, err := c.Lock(ctx, "orders/42", &redlock.LockOptions{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Unlock(ctx)
	fmt.Printf("B holds orders/42 with fencing token %d; writes: %s\n", b.FencingToken(), result(res.write(b.FencingToken(), "written by B")))

	// A wakes up, still believing it holds the lock, and writes: the resource refuses.
	fmt.Printf("A wakes and writes with token %d: %s\n", a.FencingToken, result(res.write(a.FencingToken, "written by A, late")))
	v, err := res.do("GET", "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("the resource holds %q\n", v)
}
