// client.go -- the Client: configuration, requests, answers, and the plain calls
// (Acquire, Extend, Release, Status; of a semaphore AcquirePermit, ExtendPermit,
// ReleasePermit, SemaphoreStatus).

package redlock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one redlockd URL.  It is safe for concurrent use.
type Client struct {
	base           string // without a trailing slash
	token          string
	hc             *http.Client
	attemptTimeout time.Duration
	retries        int
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request (for a service run
// with --auth-tokens-file).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a client of the package's own.  Its Timeout must be
// zero: a streamed hold is one request that lasts as long as the lock.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithAttemptTimeout bounds how long one acquire attempt may go unanswered beyond its
// wait (default 10 s).  An attempt that times out is retried (see WithRetries).
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *Client) { c.attemptTimeout = d }
}

// WithRetries sets how many times an acquire that got no answer (timeout, connection
// error) is tried again, with the same lease, so that a grant whose answer was lost is
// taken up rather than left to expire (default 2).
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// New returns a Client of the service at baseURL ("http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("redlock: the URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("redlock: the URL %q is not http(s)://host[:port]", baseURL)
	}
	c := &Client{
		base:           strings.TrimRight(baseURL, "/"),
		attemptTimeout: 10 * time.Second,
		retries:        2,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		// The service closes a connection idle for --header-timeout-ms (15 s by
		// default): drop ours first rather than race it with a request.
		t.IdleConnTimeout = 10 * time.Second
		c.hc = &http.Client{Transport: t}
	}
	if c.hc.Timeout != 0 {
		return nil, errors.New("redlock: WithHTTPClient: the client's Timeout must be 0 (a streamed hold is one request as long as the lock; contexts bound the others)")
	}
	if c.attemptTimeout <= 0 {
		return nil, errors.New("redlock: the attempt timeout must be positive")
	}
	if c.retries < 0 {
		c.retries = 0
	}
	return c, nil
}

// LockOptions are the options of an acquire.  The zero value (or nil) asks for the
// service's default ttl, no wait, no owner, a lease of the client's making and, for
// Lock, a streamed hold.
type LockOptions struct {
	// TTL of the lock on the masters (0: the service's --default-ttl-ms, 30 s).
	TTL time.Duration
	// Wait up to this long for a held lock (0: answer ErrLockHeld at once).  The
	// service bounds it with --max-wait-ms (60 s by default).
	Wait time.Duration
	// Owner is shown by Status and GET /locks (1..256 printable ASCII bytes).
	Owner string
	// Lease to acquire with (16..128 of [A-Za-z0-9_-]); "" makes a random one.  An
	// acquire that repeats a lease already holding the lock gets the same fencing token
	// back: the retry of an acquire whose answer was lost.
	Lease string
	// KeepAlive says how Lock keeps the lock (Lock only; Acquire ignores it, and
	// Semaphore always extends).
	KeepAlive KeepAlive
	// Shared takes a read hold: any number of shared holders at once, never beside an
	// exclusive one (locks only; Owner is for exclusive holds).
	Shared bool
}

// KeepAlive says how Lock keeps a lock until Unlock.
type KeepAlive int

const (
	// Stream holds the lock with hold=stream: one HTTP request open for as long as the
	// lock is held.  The service extends the lease and says each time; if this process
	// dies or its connection drops, the service releases the lock at once.
	Stream KeepAlive = iota
	// Extend holds the lock with a PATCH every third of the ttl, from this process.
	// A process that dies leaves the lock held until its ttl runs out.
	Extend
)

func (k KeepAlive) String() string {
	switch k {
	case Stream:
		return "stream"
	case Extend:
		return "extend"
	}
	return "KeepAlive(" + strconv.Itoa(int(k)) + ")"
}

// Grant is a granted acquire.
type Grant struct {
	Name         string
	Lease        string        // the secret that releases and extends it
	FencingToken int64         // larger for every later grant of the name
	Validity     time.Duration // how long it may be assumed held, from the request
	TTL          time.Duration // its expiry on the masters
	Shared       bool          // a read hold (its token is the last writer's)
}

// PermitGrant is a granted permit of a semaphore.  Its FencingToken is T*1024+Slot:
// larger for every later grant of the name, and per slot strictly increasing.
type PermitGrant struct {
	Grant
	Permits int // the semaphore's number of permits
	Slot    int // this permit's, 0..Permits-1
}

// Extension is a successful Extend.
type Extension struct {
	Name         string
	FencingToken int64 // the name's latest token (the holder's, or larger)
	Validity     time.Duration
	TTL          time.Duration
}

// State is what Status says of a lock.  It never contains the lease.
type State struct {
	Name         string
	Held         bool
	Owner        string        // "" when the grant named none
	Validity     time.Duration // 0 when not held; negative: held by a key without expiry
	FencingToken int64         // the latest token of the name, 0 if never granted
	Index        string        // changes whenever the lock's state does
	Readers      int           // shared holders holding it now
}

// SemaphoreState is what SemaphoreStatus says of a semaphore.
type SemaphoreState struct {
	Name    string
	Permits int // the number its holders use; 0 when none was granted within the longest ttl
	Held    int // permits held now
	Free    int // Permits - Held (0 when Permits is)
}

type wireGrant struct {
	Name         string `json:"name"`
	Lease        string `json:"lease"`
	FencingToken *int64 `json:"fencing_token"`
	ValidityMs   *int64 `json:"validity_ms"`
	TTLMs        int64  `json:"ttl_ms"`
	Mode         string `json:"mode"`
	Permits      *int   `json:"permits"`
	Slot         *int   `json:"slot"`
}

func (w *wireGrant) grant() (*Grant, error) {
	if w.Lease == "" || w.FencingToken == nil || w.ValidityMs == nil {
		return nil, errors.New("the grant lacks lease, fencing_token or validity_ms")
	}
	return &Grant{Name: w.Name, Lease: w.Lease, FencingToken: *w.FencingToken,
		Validity: ms(*w.ValidityMs), TTL: ms(w.TTLMs), Shared: w.Mode == "shared"}, nil
}

func (w *wireGrant) permit() (*PermitGrant, error) {
	g, err := w.grant()
	if err != nil {
		return nil, err
	}
	if w.Permits == nil || w.Slot == nil {
		return nil, errors.New("the grant lacks permits or slot")
	}
	return &PermitGrant{Grant: *g, Permits: *w.Permits, Slot: *w.Slot}, nil
}

type wireError struct {
	Error        string `json:"error"`
	Message      string `json:"message"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	NodesOK      int    `json:"nodes_ok"`
	Quorum       int    `json:"quorum"`
	Permits      int    `json:"permits"`
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// toMs is d in whole milliseconds, at least 1 if d is positive.
func toMs(d time.Duration) int64 {
	n := d.Milliseconds()
	if n == 0 && d > 0 {
		n = 1
	}
	return n
}

// target is what an acquire takes: a lock (permits 0) or a permit of a semaphore.
type target struct {
	name    string
	path    string
	permits int
}

func lockTarget(name string) target {
	return target{name: name, path: "/locks/" + url.PathEscape(name)}
}

func semTarget(name string, permits int) target {
	return target{name: name, path: "/semaphores/" + url.PathEscape(name), permits: permits}
}

// newRequest makes a request of path with body (nil: none) as JSON.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/x-ndjson")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// errorOf turns a non-2xx answer into an *Error (the body is read, not closed).
func errorOf(op string, resp *http.Response) error {
	e := &Error{Op: op, Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var w wireError
	if json.Unmarshal(b, &w) == nil && w.Error != "" {
		e.Code, e.Message = ErrorCode(w.Error), w.Message
		e.RetryAfter = ms(w.RetryAfterMs)
		e.NodesOK, e.Quorum, e.Permits = w.NodesOK, w.Quorum, w.Permits
	} else {
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
	}
	if e.RetryAfter == 0 && (e.Code == ErrLockHeld || e.Code == ErrLockContended) {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}

// call sends one request and decodes a 2xx JSON answer into out.
func (c *Client) call(ctx context.Context, op, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("redlock: %s: %w", op, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("redlock: %s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorOf(op, resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("redlock: %s: the answer (HTTP %d): %w", op, resp.StatusCode, err)
	}
	return nil
}

// acquireBody is the JSON body of POST /locks/{name} or /semaphores/{name}.
func acquireBody(t target, o *LockOptions, lease string, wait time.Duration, stream bool) map[string]any {
	b := map[string]any{"lease": lease}
	if t.permits != 0 {
		b["permits"] = t.permits
	}
	if o.Shared {
		b["mode"] = "shared"
	}
	if o.TTL > 0 {
		b["ttl_ms"] = toMs(o.TTL)
	}
	if wait > 0 {
		b["wait_ms"] = toMs(wait)
	}
	if o.Owner != "" {
		b["owner"] = o.Owner
	}
	if stream {
		b["hold"] = "stream"
	}
	return b
}

// NewLease returns a random lease: 192 bits from crypto/rand, 32 URL-safe characters.
func NewLease() string { return newLease() }

// isNoAnswer says whether err means no HTTP answer came (the attempt may or may not
// have been granted), as opposed to an answer or the caller's own cancellation.
func isNoAnswer(ctx context.Context, err error) bool {
	var e *Error
	return err != nil && !errors.As(err, &e) && ctx.Err() == nil
}

// Acquire takes the lock name once, for opts.TTL, waiting up to opts.Wait if it is
// held.  Nothing keeps it: extend it before its Validity runs out, release it after.
// An attempt that gets no answer within Wait plus the attempt timeout is tried again
// with the same lease (WithRetries), which takes up a grant whose answer was lost.
// With opts.Shared it takes a read hold: any number of them at once, none beside an
// exclusive holder; Extend and Release take its lease as any other.
func (c *Client) Acquire(ctx context.Context, name string, opts *LockOptions) (*Grant, error) {
	w, _, err := c.acquire(ctx, lockTarget(name), opts)
	if err != nil {
		return nil, err
	}
	return grantOf("acquire "+name, w)
}

// AcquirePermit takes one of the permits (1..1024) of the semaphore name, as Acquire
// takes a lock: at most that many holders at once.  Every caller of a name must use the
// same number: another answers ErrPermitsMismatch (Error.Permits: the number in use).
// Every permit taken answers ErrLockHeld (after waiting up to opts.Wait).
func (c *Client) AcquirePermit(ctx context.Context, name string, permits int, opts *LockOptions) (*PermitGrant, error) {
	w, _, err := c.acquire(ctx, semTarget(name, permits), opts)
	if err != nil {
		return nil, err
	}
	p, err := w.permit()
	if err != nil {
		return nil, fmt.Errorf("redlock: acquire permit %s: %w", name, err)
	}
	return p, nil
}

func grantOf(op string, w *wireGrant) (*Grant, error) {
	g, err := w.grant()
	if err != nil {
		return nil, fmt.Errorf("redlock: %s: %w", op, err)
	}
	return g, nil
}

// acquire sends the acquire of t (retried with its lease when no answer came); the
// grant's answer, and when the attempt that was granted was sent.
func (c *Client) acquire(ctx context.Context, t target, opts *LockOptions) (*wireGrant, time.Time, error) {
	o := LockOptions{}
	if opts != nil {
		o = *opts
	}
	lease := o.Lease
	if lease == "" {
		lease = newLease()
	}
	op := "acquire " + t.name
	start := time.Now()
	for attempt := 0; ; attempt++ {
		wait := o.Wait - time.Since(start) // a retry waits only for what is left
		if wait < 0 {
			wait = 0
		}
		actx, cancel := context.WithTimeout(ctx, wait+c.attemptTimeout)
		sent := time.Now()
		var w wireGrant
		err := c.call(actx, op, http.MethodPost, t.path, acquireBody(t, &o, lease, wait, false), &w)
		cancel()
		if err == nil {
			return &w, sent, nil
		}
		if !isNoAnswer(ctx, err) || attempt >= c.retries {
			return nil, sent, err
		}
	}
}

// Extend sets the expiry of the lock held by lease to ttl from now (0: the service's
// default ttl).  The fencing token does not change.
func (c *Client) Extend(ctx context.Context, name, lease string, ttl time.Duration) (*Extension, error) {
	return c.extend(ctx, lockTarget(name), lease, ttl)
}

// ExtendPermit sets the expiry of the permit of semaphore name held by lease to ttl
// from now (0: the default ttl).  The answer's FencingToken is the semaphore's counter
// on the permit's slot (at least the permit's own token).
func (c *Client) ExtendPermit(ctx context.Context, name, lease string, ttl time.Duration) (*Extension, error) {
	return c.extend(ctx, semTarget(name, 0), lease, ttl)
}

func (c *Client) extend(ctx context.Context, t target, lease string, ttl time.Duration) (*Extension, error) {
	body := map[string]any{"lease": lease}
	if ttl > 0 {
		body["ttl_ms"] = toMs(ttl)
	}
	var w struct {
		Name         string `json:"name"`
		FencingToken int64  `json:"fencing_token"`
		ValidityMs   int64  `json:"validity_ms"`
		TTLMs        int64  `json:"ttl_ms"`
	}
	if err := c.call(ctx, "extend "+t.name, http.MethodPatch, t.path, body, &w); err != nil {
		return nil, err
	}
	return &Extension{Name: w.Name, FencingToken: w.FencingToken, Validity: ms(w.ValidityMs),
		TTL: ms(w.TTLMs)}, nil
}

// Release deletes the lock held by lease.  A lease that no longer holds it (expired,
// released, broken) answers ErrLeaseNotFound.
func (c *Client) Release(ctx context.Context, name, lease string) error {
	return c.release(ctx, lockTarget(name), lease)
}

// ReleasePermit gives back the permit of semaphore name held by lease; as Release.
func (c *Client) ReleasePermit(ctx context.Context, name, lease string) error {
	return c.release(ctx, semTarget(name, 0), lease)
}

func (c *Client) release(ctx context.Context, t target, lease string) error {
	var w struct {
		Released bool `json:"released"`
	}
	op := "release " + t.name
	if err := c.call(ctx, op, http.MethodDelete, t.path, map[string]any{"lease": lease}, &w); err != nil {
		return err
	}
	if !w.Released {
		return fmt.Errorf("redlock: %s: the answer does not say released", op)
	}
	return nil
}

// Status says whether a quorum holds the lock name, for how long, who (the owner the
// grant named) and its latest fencing token.
func (c *Client) Status(ctx context.Context, name string) (*State, error) {
	var w struct {
		Name         string  `json:"name"`
		Held         bool    `json:"held"`
		Owner        *string `json:"owner"`
		ValidityMs   int64   `json:"validity_ms"`
		FencingToken int64   `json:"fencing_token"`
		Index        string  `json:"index"`
		Readers      int     `json:"readers"`
	}
	if err := c.call(ctx, "status "+name, http.MethodGet, lockTarget(name).path, nil, &w); err != nil {
		return nil, err
	}
	s := &State{Name: w.Name, Held: w.Held, Validity: ms(w.ValidityMs),
		FencingToken: w.FencingToken, Index: w.Index, Readers: w.Readers}
	if w.Owner != nil {
		s.Owner = *w.Owner
	}
	return s, nil
}

// SemaphoreStatus says how many permits of the semaphore name are held, of how many.
func (c *Client) SemaphoreStatus(ctx context.Context, name string) (*SemaphoreState, error) {
	var w struct {
		Name    string `json:"name"`
		Permits *int   `json:"permits"`
		Held    int    `json:"held"`
		Free    *int   `json:"free"`
	}
	t := semTarget(name, 0)
	if err := c.call(ctx, "semaphore status "+name, http.MethodGet, t.path, nil, &w); err != nil {
		return nil, err
	}
	s := &SemaphoreState{Name: w.Name, Held: w.Held}
	if w.Permits != nil {
		s.Permits = *w.Permits
	}
	if w.Free != nil {
		s.Free = *w.Free
	}
	return s, nil
}
