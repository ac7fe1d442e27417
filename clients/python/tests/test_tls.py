"""test_tls.py -- the clients over HTTPS: a third redlockd on the stack's masters, started
here with --tls-cert/--tls-key (a self-signed certificate made by openssl for localhost
and 127.0.0.1), reached with a CA file or an ssl.SSLContext; plain calls and a duplex
streamed hold (its lines read through TLS) from both clients; no CA: refused.  Its tokens
file also holds a token scoped to py-client/ (no +admin): Forbidden where it must be."""
import asyncio
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import unittest

import redlockd
import redlockd.aio as aio
from helpers import MASTER_PORTS, REPO, TOKEN, require_stack, unique, wait_until


SCOPED = "scoped-token-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc = None
        if not shutil.which("openssl") or len(MASTER_PORTS) != 5:
            return
        cls.dir = tempfile.mkdtemp(prefix="redlock-py-tls.")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        key = os.path.join(cls.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "2", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key,
                        "-out", cls.cert], check=True, capture_output=True)
        tokens = os.path.join(cls.dir, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + " +admin name=clients\n")
            f.write(SCOPED + " py-client/ name=scoped\n")
        os.chmod(tokens, 0o600)
        binary = os.environ.get("REDLOCKD_BIN") or os.path.join(REPO, "bin", "redlockd")
        cls.port = free_port()
        cls.log = open(os.path.join(cls.dir, "redlockd.log"), "w")
        cls.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:%d" % cls.port, "--masters",
             ",".join("127.0.0.1:%d" % p for p in MASTER_PORTS), "--node-timeout-ms", "250",
             "--auth-tokens-file", tokens, "--tls-cert", cls.cert, "--tls-key", key],
            stdout=cls.log, stderr=subprocess.STDOUT)
        cls.url = "https://127.0.0.1:%d" % cls.port
        ctx = ssl.create_default_context(cafile=cls.cert)
        c = redlockd.Client(cls.url, token=TOKEN, ssl_context=ctx, timeout=2)

        def up():
            if cls.proc.poll() is not None:
                raise AssertionError("redlockd --tls-cert exited: %s" % cls.proc.returncode)
            try:
                return c.ready().ready
            except redlockd.RedlockError:
                return False
        wait_until(up, 20, "the TLS instance to be ready", 0.1)
        c.close()

    @classmethod
    def tearDownClass(cls):
        if cls.proc is not None:
            cls.proc.kill()
            cls.proc.wait()
            cls.log.close()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        require_stack(self)
        if self.proc is None:
            self.skipTest("no openssl")

    def test_ca_file_and_ssl_context(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        for kw in ({"ca_file": self.cert}, {"ssl_context": ctx}):
            with self.subTest(kw=list(kw)):
                with redlockd.Client(self.url, token=TOKEN, **kw) as c:
                    name = unique("tls")
                    with c.lock(name, ttl=1) as lock:     # a duplex hold through TLS
                        self.assertFalse(lock.lost.wait(2.2), lock.lost_reason)
                        self.assertTrue(c.status(name).held)
                    self.assertTrue(lock.release_confirmed)
                    g = c.acquire(name, ttl=1)
                    self.assertGreater(g.fencing_token, lock.fencing_token)
                    c.release(name, g.lease)
        with redlockd.Client("https://localhost:%d" % self.port, token=TOKEN,
                             ca_file=self.cert) as c:       # by name, with SNI
            self.assertTrue(c.ready().ready)

    def test_a_scoped_token(self):
        """A token scoped to py-client/ and not +admin: listing narrowed to its scope, a
        name outside it and a force-break Forbidden (403)."""
        with redlockd.Client(self.url, token=SCOPED, ca_file=self.cert) as c:
            name = unique("scoped")
            g = c.acquire(name, ttl=5)
            self.assertEqual(c.list_locks().prefix, "py-client/")
            self.assertIn(name, [x.name for x in c.list_locks().locks])
            with self.assertRaises(redlockd.Forbidden) as cm:
                c.acquire("elsewhere/x", ttl=1)
            self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
            with self.assertRaises(redlockd.Forbidden):
                c.force_release(name)
            with self.assertRaises(redlockd.Forbidden):
                c.list_locks("elsewhere/")
            c.release(name, g.lease)

    def test_an_unknown_certificate_is_refused(self):
        with redlockd.Client(self.url, token=TOKEN, timeout=10, retries=0) as c:
            with self.assertRaises(redlockd.Unreachable) as cm:
                c.status("x")
            self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))

    def test_asyncio(self):
        async def main():
            async with aio.AsyncClient(self.url, token=TOKEN, ca_file=self.cert) as c:
                name = unique("tls-aio")
                async with c.lock(name, ttl=1) as lock:
                    await asyncio.sleep(2.2)
                    self.assertFalse(lock.lost.is_set(), lock.lost_reason)
                    self.assertTrue((await c.status(name)).held)
                self.assertFalse((await c.status(name)).held)
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
