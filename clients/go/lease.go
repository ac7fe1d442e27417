// lease.go -- leases of the client's making.

package redlock

import (
	"crypto/rand"
	"encoding/base64"
)

// newLease returns 192 random bits as 32 characters of [A-Za-z0-9_-], the shape of the
// service's own leases.  crypto/rand does not fail on Linux; if it ever did, no lease
// could be trusted to be unique, so it panics.
func newLease() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("redlock: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
