// client.go -- the Client: configuration, requests with whole-call deadlines, answers,
// and the plain calls of one lock or permit (Acquire, Extend, Release, ReleaseHold,
// ForceRelease; AcquirePermit, ExtendPermit, ReleasePermit).

package redlock

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Version is this client's version (the one place it is kept; sent in User-Agent).
const Version = "0.1.0"

// DefaultURL is the service New("") talks to when REDLOCK_URL is unset: what `make run`
// and the service's own default --listen serve.
const DefaultURL = "http://127.0.0.1:8080"

// Client talks to one redlockd URL.  It is safe for concurrent use.
type Client struct {
	base    string // without a trailing slash
	token   string
	hc      *http.Client
	timeout time.Duration // every call: connect + send + receive, beyond its wait
	retries int
	tlsConf *tls.Config
	tokenOK bool // WithToken was given (New("") then does not read REDLOCK_TOKEN)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request (for a service run
// with --auth-tokens-file).
func WithToken(token string) Option { return func(c *Client) { c.token, c.tokenOK = token, true } }

// WithHTTPClient uses hc instead of a client of the package's own.  Its Timeout must be
// zero (each call has its own deadline; a streamed hold is a connection as long as the
// lock), and its transport must speak HTTP/1.1 (a streamed hold upgrades the connection).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTLSConfig uses conf for https:// URLs (a CA of your own: conf.RootCAs; a client
// certificate: conf.Certificates).  Not with WithHTTPClient, whose transport has its own.
func WithTLSConfig(conf *tls.Config) Option { return func(c *Client) { c.tlsConf = conf } }

// WithTimeout bounds every call, all of it together (connecting, sending, receiving the
// whole answer), beyond the time the call asks the service to wait (an acquire's Wait, a
// watch's wait): 10 s by default.  An acquire whose attempt times out is retried with
// its lease (WithRetries).  The caller's ctx may end a call sooner.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithAttemptTimeout is WithTimeout's old name.
//
// Deprecated: use WithTimeout.
func WithAttemptTimeout(d time.Duration) Option { return WithTimeout(d) }

// WithRetries sets how many times an acquire that got no answer (timeout, connection
// error) is tried again, with the same lease, so that a grant whose answer was lost is
// taken up rather than left to expire (default 2).  Streamed holds are never retried.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// New returns a Client of the service at baseURL ("http://127.0.0.1:8080").  An empty
// baseURL takes REDLOCK_URL from the environment, else DefaultURL; and then, unless
// WithToken is given, the token REDLOCK_TOKEN (as the redlock command does).
func New(baseURL string, opts ...Option) (*Client, error) {
	fromEnv := baseURL == ""
	if fromEnv {
		baseURL = os.Getenv("REDLOCK_URL")
		if baseURL == "" {
			baseURL = DefaultURL
		}
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("redlock: the URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("redlock: the URL %q is not http(s)://host[:port]", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), timeout: 10 * time.Second, retries: 2}
	for _, o := range opts {
		o(c)
	}
	if fromEnv && !c.tokenOK {
		c.token = os.Getenv("REDLOCK_TOKEN")
	}
	if c.hc != nil && c.tlsConf != nil {
		return nil, errors.New("redlock: WithTLSConfig and WithHTTPClient: give the TLS config to your client's transport")
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		// The service closes a connection idle for --header-timeout-ms (15 s by
		// default): drop ours first rather than race it with a request.
		t.IdleConnTimeout = 10 * time.Second
		// HTTP/1.1 only: a streamed hold upgrades its connection (redlockd speaks no h2).
		t.ForceAttemptHTTP2 = false
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		if c.tlsConf != nil {
			t.TLSClientConfig = c.tlsConf.Clone()
		}
		c.hc = &http.Client{Transport: t}
	}
	if c.hc.Timeout != 0 {
		return nil, errors.New("redlock: WithHTTPClient: the client's Timeout must be 0 (every call has its own deadline; a streamed hold is a connection as long as the lock)")
	}
	if c.timeout <= 0 {
		return nil, errors.New("redlock: the timeout must be positive")
	}
	if c.retries < 0 {
		c.retries = 0
	}
	return c, nil
}

// URL is the service's base URL.
func (c *Client) URL() string { return c.base }

// LockOptions are the options of an acquire.  The zero value (or nil) asks for the
// service's default ttl, no wait, no owner, a lease of the client's making and, for
// Lock and Semaphore, a streamed hold.
type LockOptions struct {
	// TTL of the lock on the masters (0: the service's --default-ttl-ms, 30 s).
	TTL time.Duration
	// Wait up to this long for a held lock (0: answer ErrLockHeld at once).  The
	// service bounds it with --max-wait-ms (60 s by default).
	Wait time.Duration
	// Owner is shown by Status, List and Election.Leader (1..256 printable ASCII bytes).
	Owner string
	// Lease to acquire with (16..128 of [A-Za-z0-9_-]); "" makes a random one.  An
	// acquire that repeats a lease already holding the lock gets the same fencing token
	// back: the retry of an acquire whose answer was lost.
	Lease string
	// KeepAlive says how Lock and Semaphore keep what they took (Acquire ignores it).
	KeepAlive KeepAlive
	// Shared takes a read hold: any number of shared holders at once, never beside an
	// exclusive one (locks only; Owner is for exclusive holds).
	Shared bool
	// Reentrant, with the Lease of the lock's current exclusive holder, counts one more
	// hold of it (same fencing token; Grant.Holds says how many) instead of being a
	// retry; each release gives one back, and the lock is free when none is left.
	Reentrant bool
}

// KeepAlive says how Lock and Semaphore keep a lock until Unlock.
type KeepAlive int

const (
	// Stream holds the lock by a duplex streamed hold (hold=stream, Upgrade:
	// redlock-hold): one connection for as long as the lock is held, on which the client
	// pings and the service answers with the validity left, counted from the ping's
	// send.  The service extends the lock; if this process stops pinging (it died, it is
	// paused, its connection was cut) the service lets it go about one ttl later.
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
	FencingToken int64         // larger for every later exclusive grant of the name
	Validity     time.Duration // how long it may be assumed held, counted from the request's send
	TTL          time.Duration // its expiry on the masters
	Shared       bool          // a read hold (its token is the last writer's)
	Holds        int           // a reentrant lease's hold count (0 when not reentrant)
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
	FencingToken int64         // the name's latest token (the holder's, or larger)
	Validity     time.Duration // counted from the request's send
	TTL          time.Duration
}

type wireGrant struct {
	Name          string            `json:"name"`
	Names         []string          `json:"names"`
	Lease         string            `json:"lease"`
	FencingToken  *int64            `json:"fencing_token"`
	FencingTokens map[string]int64  `json:"fencing_tokens"`
	Modes         map[string]string `json:"modes"`
	ValidityMs    *int64            `json:"validity_ms"`
	TTLMs         int64             `json:"ttl_ms"`
	Mode          string            `json:"mode"`
	Permits       *int              `json:"permits"`
	Slot          *int              `json:"slot"`
	Holds         int               `json:"holds"`
	PingMs        int64             `json:"ping_ms"`    // a duplex hold's grant line
	SilenceMs     int64             `json:"silence_ms"` // likewise
}

func (w *wireGrant) grant() (*Grant, error) {
	if w.Lease == "" || w.FencingToken == nil || w.ValidityMs == nil {
		return nil, errors.New("the grant lacks lease, fencing_token or validity_ms")
	}
	return &Grant{Name: w.Name, Lease: w.Lease, FencingToken: *w.FencingToken,
		Validity: ms(*w.ValidityMs), TTL: ms(w.TTLMs), Shared: w.Mode == "shared",
		Holds: w.Holds}, nil
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
	Quarantined  int    `json:"quarantined"`
	RejoinMs     *int64 `json:"rejoin_ms"`
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

// target is what an acquire takes: a lock (permits 0), a permit of a semaphore, or a
// set of locks (names).
type target struct {
	name    string
	path    string
	permits int
	names   []string
	shared  map[string]bool // a set's names held shared
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
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "redlock-go/"+Version)
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
		e.Quarantined, e.RejoinIn = w.Quarantined, -1
		if w.RejoinMs != nil {
			e.RejoinIn = ms(*w.RejoinMs)
		}
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

// callCtx bounds a call that asks the service to wait up to wait: the caller's ctx,
// and wait + the client's timeout for all of it.
func (c *Client) callCtx(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, wait+c.timeout)
}

// call sends one request and decodes a 2xx JSON answer into out (a *string out takes
// the answer as text).  The whole call, answer included, ends by ctx's deadline.
func (c *Client) call(ctx context.Context, op, method, path string, body, out any) error {
	_, err := c.callStatus(ctx, op, method, path, body, out, nil)
	return err
}

// callStatus is call that also accepts the statuses in also as answers (decoded into
// out like a 2xx), and says which status came.
func (c *Client) callStatus(ctx context.Context, op, method, path string, body, out any, also []int) (int, error) {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return 0, fmt.Errorf("redlock: %s: %w", op, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("redlock: %s: %w", op, err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	for _, s := range also {
		ok = ok || resp.StatusCode == s
	}
	if !ok {
		return resp.StatusCode, errorOf(op, resp)
	}
	if s, isText := out.(*string); isText {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return resp.StatusCode, fmt.Errorf("redlock: %s: the answer (HTTP %d): %w", op, resp.StatusCode, err)
		}
		*s = string(b)
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("redlock: %s: the answer (HTTP %d): %w", op, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

// acquireBody is the JSON body of POST /locks/{name}, /semaphores/{name} or /locks.
func acquireBody(t target, o *LockOptions, lease string, wait time.Duration, stream bool) map[string]any {
	b := map[string]any{"lease": lease}
	if t.names != nil {
		b["names"] = t.names
		if len(t.shared) > 0 {
			modes := map[string]string{}
			for n := range t.shared {
				modes[n] = "shared"
			}
			b["modes"] = modes
		}
	}
	if t.permits != 0 {
		b["permits"] = t.permits
	}
	if o.Shared {
		b["mode"] = "shared"
	}
	if o.Reentrant {
		b["reentrant"] = true
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
// held.  Nothing keeps it: extend it before its Validity (counted from before the call)
// runs out, release it after.  An attempt that gets no answer within Wait plus the
// client's timeout is tried again with the same lease (WithRetries), which takes up a
// grant whose answer was lost.  With opts.Shared it takes a read hold: any number of them
// at once, none beside an exclusive holder.  With opts.Reentrant and the holder's
// opts.Lease it counts one more hold (Grant.Holds).
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
// grant's answer, and when the attempt that was granted was sent (its validity's anchor).
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
		actx, cancel := c.callCtx(ctx, wait)
		sent := time.Now()
		var w wireGrant
		err := c.call(actx, op, http.MethodPost, t.path, acquireBody(t, &o, lease, wait, false), &w)
		cancel()
		if err == nil {
			return &w, sent, nil
		}
		// A reentrant acquire is not retried: a retry of one that was granted would
		// count a second hold.
		if !isNoAnswer(ctx, err) || attempt >= c.retries || o.Reentrant {
			return nil, sent, err
		}
	}
}

// Extend sets the expiry of the lock held by lease to ttl from now (0: the service's
// default ttl).  The fencing token does not change.  The Extension's Validity counts
// from before the call.
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
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	if err := c.call(cctx, "extend "+t.name, http.MethodPatch, t.path, body, &w); err != nil {
		return nil, err
	}
	return &Extension{Name: w.Name, FencingToken: w.FencingToken, Validity: ms(w.ValidityMs),
		TTL: ms(w.TTLMs)}, nil
}

// Release deletes the lock held by lease.  A lease that no longer holds it (expired,
// released, broken) answers ErrLeaseNotFound.  A reentrant lease gives back one hold
// (ReleaseHold says how many are left); nil either way.  ErrReleaseUnconfirmed: the
// masters that did not answer may still hold it; the service finishes the release (stop
// using the resource, do not count on the lock being free before its ttl; a plain lock
// may be released again later to learn the outcome, a reentrant one must not: each
// release takes a hold back).
func (c *Client) Release(ctx context.Context, name, lease string) error {
	_, err := c.release(ctx, lockTarget(name), lease, "")
	return err
}

// ReleaseHold is Release that says how many holds the lease still has (0: the lock is
// released; more: a reentrant lease that still holds it).
func (c *Client) ReleaseHold(ctx context.Context, name, lease string) (holds int, err error) {
	return c.release(ctx, lockTarget(name), lease, "")
}

// ReleasePermit gives back the permit of semaphore name held by lease; as Release.
func (c *Client) ReleasePermit(ctx context.Context, name, lease string) error {
	_, err := c.release(ctx, semTarget(name, 0), lease, "")
	return err
}

// ForceRelease breaks the lock name whatever its lease (DELETE ?force=true): only with a
// token marked +admin in the service's tokens file (ErrForbidden otherwise).  The holder
// is not told until its next extension or release (ErrLeaseNotFound); its fencing token is
// what keeps it off the resource, as every later grant's is larger.  nil also when
// nobody held it.
func (c *Client) ForceRelease(ctx context.Context, name string) error {
	_, err := c.release(ctx, lockTarget(name), "", "?force=true")
	return err
}

func (c *Client) release(ctx context.Context, t target, lease, query string) (int, error) {
	var w struct {
		Released bool `json:"released"`
		Holds    *int `json:"holds"`
	}
	op := "release " + t.name
	var body any
	if lease != "" {
		body = map[string]any{"lease": lease}
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	if err := c.call(cctx, op, http.MethodDelete, t.path+query, body, &w); err != nil {
		return 0, err
	}
	switch {
	case w.Released:
		return 0, nil
	case w.Holds != nil && *w.Holds > 0:
		return *w.Holds, nil
	}
	return 0, fmt.Errorf("redlock: %s: the answer says neither released nor holds left", op)
}
