"""The README's fencing example: python3 examples/fencing.py [DB] (REDLOCK_URL,
REDLOCK_TOKEN).  The protected resource is an SQLite database that keeps, per name, the
largest fencing token it has accepted, and refuses a write that carries a smaller one, in
the same transaction as the write itself."""
import os
import sqlite3
import sys
import tempfile
import time

import redlockd


def open_ledger(path):
    db = sqlite3.connect(path, isolation_level=None, timeout=10)
    db.execute("CREATE TABLE IF NOT EXISTS fence (name TEXT PRIMARY KEY, token INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS entries (name TEXT, token INTEGER, body TEXT)")
    return db


def fenced_write(db, name, token, body):
    """Write body under `name` unless a larger token than `token` was accepted before:
    check and write in one transaction.  True if written."""
    db.execute("BEGIN IMMEDIATE")
    try:
        cur = db.execute(
            "INSERT INTO fence (name, token) VALUES (?, ?) ON CONFLICT (name) DO UPDATE"
            " SET token = excluded.token WHERE excluded.token >= fence.token", (name, token))
        if cur.rowcount == 0:
            db.execute("ROLLBACK")
            return False
        db.execute("INSERT INTO entries VALUES (?, ?, ?)", (name, token, body))
        db.execute("COMMIT")
        return True
    except BaseException:
        db.execute("ROLLBACK")
        raise


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "ledger.db")
    db = open_ledger(path)
    client = redlockd.Client()
    a = client.acquire("ledger", ttl=1)        # A holds it... and stalls (a GC or VM
    time.sleep(1.5)                            # pause): its lock expires meanwhile
    with client.lock("ledger", ttl=10) as b:   # B takes it, with a larger token
        ok = fenced_write(db, "ledger", b.fencing_token, "B's entry")
        print("B writes with token", b.fencing_token, "->", "accepted" if ok else "refused")
    ok = fenced_write(db, "ledger", a.fencing_token, "A's late entry")
    print("A wakes up, writes with token", a.fencing_token, "->", "accepted" if ok else "refused")
    print("entries:", db.execute("SELECT token, body FROM entries").fetchall())


if __name__ == "__main__":
    main()
