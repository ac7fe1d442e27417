"""The README's asyncio example: python3 examples/aio_example.py (REDLOCK_URL,
REDLOCK_TOKEN)."""
import asyncio

import redlockd
import redlockd.aio


async def main():
    async with redlockd.aio.AsyncClient() as client:
        async with client.lock("reports", ttl=10, wait=5) as lock:
            print("holding reports, fencing token", lock.fencing_token)
            try:
                await client.acquire("reports", ttl=1)
            except redlockd.LockHeld as e:      # the same errors as the blocking client
                print("a second acquire:", e.code)
        print("released; held now:", (await client.status("reports")).held)

asyncio.run(main())
