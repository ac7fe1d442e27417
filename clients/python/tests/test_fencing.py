"""test_fencing.py -- the fencing token put to use, against a real store: an SQLite
database (examples/fencing.py's ledger) refuses a write carrying an older token than the
last it accepted.  A holder in another process is really paused (SIGSTOP) between its
check of the lock and its write; meanwhile its lock is let go (the service hears no
ping) and taken by another holder, who writes; continued, the paused holder's write is
refused."""
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import redlockd
from helpers import TOKEN, URL, require_stack, unique, wait_until

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
sys.path.insert(0, EXAMPLES)
import fencing  # noqa: E402  (examples/fencing.py)

HOLDER = r"""
import sys, redlockd
sys.path.insert(0, sys.argv[4])
import fencing
db = fencing.open_ledger(sys.argv[3])
client = redlockd.Client(sys.argv[1], token=sys.argv[2])
try:
    with client.lock(sys.argv[5], ttl=1) as lock:
        lock.check()                                  # it holds the lock, and then...
        print("checked", lock.fencing_token, flush=True)
        sys.stdin.readline()                          # ...it is paused right here
        print("wrote" if fencing.fenced_write(db, sys.argv[5], lock.fencing_token, "A")
              else "refused", flush=True)
except redlockd.LeaseLost as e:
    print("lost:", e.message, flush=True)
"""


class Fencing(unittest.TestCase):
    def setUp(self):
        require_stack(self)
        self.client = redlockd.Client(URL, token=TOKEN)
        self.addCleanup(self.client.close)
        fd, self.path = tempfile.mkstemp(suffix=".db")
        os.close(fd)
        self.addCleanup(os.unlink, self.path)

    def test_the_ledger_refuses_an_older_token(self):
        db = fencing.open_ledger(self.path)
        self.addCleanup(db.close)
        self.assertTrue(fencing.fenced_write(db, "n", 5, "x"))
        self.assertTrue(fencing.fenced_write(db, "n", 5, "y"))     # the same holder again
        self.assertFalse(fencing.fenced_write(db, "n", 4, "z"))
        self.assertTrue(fencing.fenced_write(db, "other", 1, "w"))   # per name
        self.assertEqual(db.execute("SELECT body FROM entries WHERE name='n'").fetchall(),
                         [("x",), ("y",)])

    def test_a_paused_holder_is_refused(self):
        name = unique("fenced")
        child = subprocess.Popen([sys.executable, "-c", HOLDER, URL, TOKEN, self.path,
                                  EXAMPLES, name], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        stopped = False
        try:
            first = child.stdout.readline().split()
            self.assertEqual(first[0], "checked", first)
            a_token = int(first[1])
            os.kill(child.pid, signal.SIGSTOP)             # paused between check and write
            stopped = True
            child.stdin.write("go\n")
            child.stdin.flush()
            # Its pings stopped: the service lets the lock go within a ttl; B takes it.
            b = wait_until(lambda: self._try_acquire(name), 10, "B's grant")
            self.assertGreater(b.fencing_token, a_token)
            db = fencing.open_ledger(self.path)
            self.addCleanup(db.close)
            self.assertTrue(fencing.fenced_write(db, name, b.fencing_token, "B"))
            os.kill(child.pid, signal.SIGCONT)              # A wakes up and writes
            stopped = False
            out, _ = child.communicate(timeout=20)
            self.assertEqual(out.splitlines()[0], "refused", out)
            self.assertIn("lost:", out)
            self.assertEqual(db.execute("SELECT token, body FROM entries").fetchall(),
                             [(b.fencing_token, "B")])
            self.client.release(name, b.lease)
        finally:
            if stopped:
                os.kill(child.pid, signal.SIGCONT)
            if child.poll() is None:
                child.kill()
                child.wait()

    def _try_acquire(self, name):
        try:
            return self.client.acquire(name, ttl=5)
        except redlockd.LockHeld:
            return None


if __name__ == "__main__":
    unittest.main()
