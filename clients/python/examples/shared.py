"""The README's shared-lock and semaphore example: python3 examples/shared.py
(REDLOCK_URL, REDLOCK_TOKEN)."""
import redlockd

client = redlockd.Client()
with client.lock("reports", shared=True) as r1, client.lock("reports", shared=True) as r2:
    print("readers:", client.status("reports").readers, "fencing token", r1.fencing_token)
    try:
        client.acquire("reports", ttl=1)                    # a writer, meanwhile
    except redlockd.LockHeld as e:
        print("a writer:", e.code)
with client.semaphore("pool/db", permits=2) as a, client.semaphore("pool/db", permits=2) as b:
    print("slots", sorted([a.slot, b.slot]), "tokens", sorted([a.fencing_token, b.fencing_token]))
    try:
        client.acquire_permit("pool/db", permits=2)         # a third holder
    except redlockd.LockHeld as e:
        print("a third permit:", e.code)
    try:
        client.acquire_permit("pool/db", permits=3)         # another number of permits
    except redlockd.PermitsMismatch as e:
        print("permits=3:", e.code, "(in use: %d)" % e.permits)
print("permits held now:", client.semaphore_status("pool/db").held)
with client.locks(["accounts/17", "accounts/42"], ttl=10) as both:   # all or nothing
    print("a set:", both.fencing_tokens)
