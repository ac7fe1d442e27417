// tls_test.go -- the client over HTTPS: a third redlockd instance on the stack's masters,
// started by the test with a certificate it makes; WithTLSConfig (its CA) holds a lock
// by a duplex streamed hold over TLS and by extensions, and a client without the CA is
// refused by the certificate check.

package redlock

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key under dir; the pool trusts it.
func selfSigned(t *testing.T, dir string) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlockd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature |
			x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// startTLSInstance starts a redlockd with --tls-cert/--tls-key on the stack's masters
// (no tokens); it is killed at the test's end.
func startTLSInstance(t *testing.T) (url string, pool *x509.CertPool) {
	t.Helper()
	bin := os.Getenv("REDLOCKD_BIN")
	if bin == "" {
		bin = "../../bin/redlockd"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no redlockd binary (%s): %v", bin, err)
	}
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	var masters []string
	for _, p := range masterPorts {
		masters = append(masters, fmt.Sprintf("127.0.0.1:%d", p))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "redlockd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--listen", addr, "--masters", strings.Join(masters, ","),
		"--node-timeout-ms", "250", "--tls-cert", cert, "--tls-key", key)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	url = "https://" + addr
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 2 * time.Second}
	waitFor(t, 20*time.Second, "the TLS instance's /readyz", func() bool {
		resp, err := hc.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, pool
}

func TestOverTLS(t *testing.T) {
	url, pool := startTLSInstance(t)
	name := lockName(t)
	c, err := New(url, WithTLSConfig(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		ttl := 900 * time.Millisecond
		l, err := c.Lock(ctxFor(t, 10*time.Second), name, &LockOptions{TTL: ttl, KeepAlive: mode})
		if err != nil {
			t.Fatalf("%v over TLS: %v", mode, err)
		}
		first := l.Deadline()
		waitFor(t, 10*time.Second, "the deadline to move on by 2 ttls", func() bool {
			return l.Deadline().After(first.Add(2 * ttl))
		})
		if err := l.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("%v unlock over TLS: %v", mode, err)
		}
		if mode == Stream && l.hold.finalLine() != "requested" {
			t.Fatalf("the stream's last line over TLS: %q", l.hold.finalLine())
		}
	}
	plain, _ := New(url)
	_, err = plain.Status(ctxFor(t, 10*time.Second), name)
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) {
		t.Fatalf("a client without the CA: %v", err)
	}
}
