"""The README's example: python3 examples/example.py (REDLOCK_URL, REDLOCK_TOKEN)."""
import redlockd

client = redlockd.Client()   # $REDLOCK_URL (default http://127.0.0.1:8080), $REDLOCK_TOKEN
with client.lock("reports", ttl_ms=10000, wait_ms=5000, owner="report-job") as lock:
    print("holding reports, fencing token", lock.fencing_token)
    try:
        client.acquire("reports", ttl_ms=1000)       # someone else, meanwhile
    except redlockd.LockHeld as e:
        print("a second acquire:", e.code, "retry after %.0f s" % e.retry_after)
    print("status:", client.status("reports"))
    if lock.lost.is_set():                           # the keep-alive failed: stop writing
        raise SystemExit("lost the lock: " + lock.lost_reason)
print("released; held now:", client.status("reports").held)
