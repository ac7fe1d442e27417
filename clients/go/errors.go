// errors.go -- the service's error codes as Go errors, and the client's own.
//
// Every error the service answers becomes an *Error carrying its code, HTTP status
// and extra fields; errors.Is(err, ErrLockHeld) tests the code, errors.As(err, &e)
// reaches the fields (RetryAfter, NodesOK, Quorum, Permits).  Codes are the ones listed in
// api/openapi.yaml (components/schemas/Error); a test checks the list below against it.

package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrorCode is one of the service's stable error codes (the "error" member of every
// error body).  Each code is itself an error, so that errors.Is(err, ErrLockHeld) says
// whether err is the service's answer with that code.
type ErrorCode string

func (c ErrorCode) Error() string { return "redlockd: " + string(c) }

// The codes of api/openapi.yaml, in its order.
const (
	ErrInvalidJSON       ErrorCode = "invalid_json"
	ErrInvalidName       ErrorCode = "invalid_name"
	ErrInvalidTTL        ErrorCode = "invalid_ttl"
	ErrInvalidWait       ErrorCode = "invalid_wait"
	ErrInvalidLease      ErrorCode = "invalid_lease"
	ErrInvalidHold       ErrorCode = "invalid_hold"
	ErrInvalidIndex      ErrorCode = "invalid_index"
	ErrInvalidOwner      ErrorCode = "invalid_owner"
	ErrInvalidLimit      ErrorCode = "invalid_limit"
	ErrInvalidForce      ErrorCode = "invalid_force"
	ErrInvalidMode       ErrorCode = "invalid_mode"
	ErrInvalidPermits    ErrorCode = "invalid_permits"
	ErrInvalidReentrant  ErrorCode = "invalid_reentrant"
	ErrInvalidQuery      ErrorCode = "invalid_query"
	ErrInvalidLockDelay  ErrorCode = "invalid_lock_delay"
	ErrInvalidMaxHold    ErrorCode = "invalid_max_hold"
	ErrInvalidToken      ErrorCode = "invalid_token"
	ErrUnauthorized      ErrorCode = "unauthorized"
	ErrForbidden         ErrorCode = "forbidden"
	ErrNotFound          ErrorCode = "not_found"
	ErrLeaseNotFound     ErrorCode = "lease_not_found"
	ErrMethodNotAllowed  ErrorCode = "method_not_allowed"
	ErrLockHeld          ErrorCode = "lock_held"
	ErrLockContended     ErrorCode = "lock_contended"
	ErrPermitsMismatch   ErrorCode = "permits_mismatch"  // another number of permits in use: Error.Permits
	ErrMaxHoldExceeded   ErrorCode = "max_hold_exceeded" // an extension past the hold's max_hold_ms
	ErrBodyTooLarge      ErrorCode = "body_too_large"
	ErrClientClosed      ErrorCode = "client_closed"
	ErrInternal          ErrorCode = "internal"
	ErrQuorumUnavailable ErrorCode = "quorum_unavailable"
	// fewer than a quorum of masters are trusted (the others sit out a restart, a loss
	// of data or a clock that misbehaved): Error.NodesOK, Quorum, Quarantined, RejoinIn
	ErrMastersQuarantined ErrorCode = "masters_quarantined"
	ErrValidityExhausted  ErrorCode = "validity_exhausted"
	ErrTooManyWaiters     ErrorCode = "too_many_waiters"
	ErrTooManyStreams     ErrorCode = "too_many_streams"
	ErrShuttingDown       ErrorCode = "shutting_down"
	// a release the masters could not confirm (some may still hold the lease); the
	// service finishes it: Error.NodesOK, Error.Quorum
	ErrReleaseUnconfirmed ErrorCode = "release_unconfirmed"
)

// Codes lists every code the service documents, in api/openapi.yaml's order.
func Codes() []ErrorCode {
	return []ErrorCode{
		ErrInvalidJSON, ErrInvalidName, ErrInvalidTTL, ErrInvalidWait, ErrInvalidLease,
		ErrInvalidHold, ErrInvalidIndex, ErrInvalidOwner, ErrInvalidLimit, ErrInvalidForce,
		ErrInvalidMode, ErrInvalidPermits, ErrInvalidReentrant, ErrInvalidQuery,
		ErrInvalidLockDelay, ErrInvalidMaxHold, ErrInvalidToken,
		ErrUnauthorized, ErrForbidden, ErrNotFound, ErrLeaseNotFound, ErrMethodNotAllowed,
		ErrLockHeld, ErrLockContended, ErrPermitsMismatch, ErrMaxHoldExceeded, ErrBodyTooLarge,
		ErrClientClosed,
		ErrInternal,
		ErrQuorumUnavailable, ErrMastersQuarantined, ErrValidityExhausted, ErrTooManyWaiters, ErrTooManyStreams,
		ErrShuttingDown, ErrReleaseUnconfirmed,
	}
}

// Error is an error answer of the service.
type Error struct {
	Op         string        // what the client was doing: "acquire orders/42"
	Status     int           // the HTTP status
	Code       ErrorCode     // the "error" member; "" if the body was not an error body
	Message    string        // the "message" member: for people, may change
	RetryAfter time.Duration // lock_held, lock_contended: when to try again
	NodesOK    int           // quorum_unavailable: masters that answered in time
	Quorum     int           // quorum_unavailable: masters needed
	Permits    int           // permits_mismatch: the number of permits in use
	// masters_quarantined: how many masters sit out, and when the first is due back
	// (negative: when its peers have proven their counters, no time known)
	Quarantined int
	RejoinIn    time.Duration
	RequestID   string // the X-Request-Id of the answer, for the service's log
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("redlock: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	code := string(e.Code)
	if code == "" {
		code = "no error code"
	}
	fmt.Fprintf(&b, "HTTP %d %s", e.Status, code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Code == ErrLockHeld || e.Code == ErrLockContended {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	if e.Code == ErrPermitsMismatch {
		fmt.Fprintf(&b, " (%d permits in use)", e.Permits)
	}
	if e.Code == ErrQuorumUnavailable || e.Code == ErrReleaseUnconfirmed {
		fmt.Fprintf(&b, " (%d of %d masters answered)", e.NodesOK, e.Quorum)
	}
	if e.Code == ErrMastersQuarantined {
		fmt.Fprintf(&b, " (%d of %d masters in quorums, %d quarantined", e.NodesOK, e.Quorum, e.Quarantined)
		if e.RejoinIn >= 0 {
			fmt.Fprintf(&b, ", the first back in %v", e.RejoinIn)
		}
		b.WriteString(")")
	}
	return b.String()
}

// Is reports whether target is e's code, so that errors.Is(err, ErrLockHeld) works.
func (e *Error) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && e.Code != "" && c == e.Code
}

// ErrLockLost is what a Lock's Err returns (wrapped in a *LostError) once the lock is
// lost: the service said so, the lease was found gone, or the validity ran out before
// an extension succeeded.  Lock.Context() is cancelled at the same moment.
var ErrLockLost = errors.New("redlock: lock lost")

// ErrUnlocked is what a Lock's Err returns after Unlock.
var ErrUnlocked = errors.New("redlock: lock unlocked")

// LostError says why a lock was lost.  It matches ErrLockLost with errors.Is, and also
// the code the service gave, if any (ErrLeaseNotFound, ErrQuorumUnavailable...).
type LostError struct {
	Name   string
	Reason string // "no_quorum", "lease_lost", "released", "expired", "stream_ended", ...
	Err    error  // the error behind it, if any
}

func (e *LostError) Error() string {
	s := "redlock: lock " + e.Name + " lost: " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *LostError) Is(target error) bool { return target == ErrLockLost }
func (e *LostError) Unwrap() error        { return e.Err }
