"""The README's example: python3 examples/example.py (REDLOCK_URL, REDLOCK_TOKEN)."""
import redlockd

client = redlockd.Client()   # $REDLOCK_URL (default http://127.0.0.1:8080), $REDLOCK_TOKEN
with client.lock("reports", ttl=10, wait=5, owner="report-job") as lock:
    print("holding reports, fencing token", lock.fencing_token)
    try:
        client.acquire("reports", ttl=1)             # someone else, meanwhile
    except redlockd.LockHeld as e:
        print("a second acquire:", e.code, "retry after %.0f s" % e.retry_after)
    print("status:", client.status("reports"))
    lock.check()                                     # raises LeaseLost once lost
print("released; held now:", client.status("reports").held)
