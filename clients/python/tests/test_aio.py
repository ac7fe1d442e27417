"""test_aio.py -- the asyncio client (redlockd.aio) against the real service: every method
of AsyncClient, AsyncLock, AsyncPermit, AsyncLockSet and AsyncElection, the same errors
as the blocking client, and the issue-29 cases (a paused instance behind a 0.8 s delay, a
trickle) for both keep-alives."""
import asyncio
import inspect
import unittest

import redlockd
import redlockd.aio as aio
from helpers import (RELAY_URL, TOKEN, URL, URL_B, Frozen, Poller, Relay, StoppedInstance,
                     require_stack, unique)
from test_faults import report


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        require_stack(self)
        self.client = aio.AsyncClient(URL, token=TOKEN, timeout=10)

    async def asyncTearDown(self):
        await self.client.close()

    def test_same_names_as_the_blocking_client(self):
        """Every public method of Client is a coroutine (or a held-form factory) of
        AsyncClient with the same parameters."""
        for name, fn in inspect.getmembers(redlockd.Client, inspect.isfunction):
            if name.startswith("_"):
                continue
            afn = getattr(aio.AsyncClient, name, None)
            self.assertIsNotNone(afn, "AsyncClient lacks " + name)
            self.assertEqual(list(inspect.signature(fn).parameters),
                             list(inspect.signature(afn).parameters), name)

    async def test_plain_calls(self):
        c = self.client
        name = unique("aio-plain")
        g = await c.acquire(name, ttl=10, owner="aio")
        self.assertGreater(g.validity, 9)
        st = await c.status(name, lease=g.lease)
        self.assertEqual((st.held, st.owner, st.holds), (True, "aio", 1))
        with self.assertRaises(redlockd.LockHeld) as cm:
            await c.acquire(name, ttl=1)
        self.assertGreater(cm.exception.retry_after, 5)
        self.assertGreater((await c.extend(name, g.lease, 20)).validity, 10)
        g2 = await c.acquire(name, ttl=10, lease=g.lease, reentrant=True)
        self.assertEqual(g2.holds, 2)
        self.assertEqual((await c.release(name, g.lease)).holds, 1)
        self.assertTrue((await c.release(name, g.lease)).released)
        with self.assertRaises(redlockd.LeaseLost):
            await c.release(name, g.lease)
        with self.assertRaises(redlockd.InvalidRequest):
            await c.acquire("bad name", ttl=1)
        # Listing, force, probes.
        g = await c.acquire(name, ttl=10)
        self.assertEqual([x.name for x in (await c.list_locks(name)).locks], [name])
        self.assertTrue((await c.force_release(name)).forced)
        self.assertTrue((await c.ready()).ready)
        self.assertEqual((await c.health()).quorum, 3)
        self.assertIn("redlockd_build_info", await c.metrics())
        # One keep-alive connection for all of it.
        self.assertEqual(c.transport.connects, 1)

    async def test_watch_and_changes(self):
        c = self.client
        name = unique("aio-watch")
        st = await c.status(name)
        async def watcher():
            w = await c.watch(name, st.index, 20)
            while not w.held:           # a spurious change first (the API allows it)
                w = await c.watch(name, w.index, 20)
            return w
        w = asyncio.ensure_future(watcher())
        g = await c.acquire(name, ttl=5)
        got = await asyncio.wait_for(w, 15)
        self.assertTrue(got.held)
        it = c.changes(name, wait=10)
        first = await it.__anext__()
        await c.release(name, g.lease)
        second = await it.__anext__()
        while second.held:
            second = await it.__anext__()
        self.assertEqual((first.held, second.held), (True, False))
        await it.aclose()

    async def test_sets_and_semaphores(self):
        c = self.client
        a, b = unique("aio-set-a"), unique("aio-set-b")
        g = await c.acquire_many([a, b], ttl=10, modes={b: "shared"})
        self.assertEqual(g.modes[b], "shared")
        self.assertEqual(set((await c.release_many(g.lease)).names), {a, b})
        sem = unique("aio-sem")
        p = await c.acquire_permit(sem, 2, ttl=10)
        self.assertEqual((await c.semaphore_status(sem)).held, 1)
        self.assertGreater((await c.extend_permit(sem, p.lease, 20)).validity, 10)
        with self.assertRaises(redlockd.PermitsMismatch):
            await c.acquire_permit(sem, 3, ttl=1)
        self.assertTrue((await c.release_permit(sem, p.lease)).released)

    async def test_held_forms_are_kept_alive(self):
        c = self.client
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("aio-keep-" + keepalive)
                async with c.lock(name, ttl=1, keepalive=keepalive) as lock:
                    self.assertTrue(await lock.locked())
                    await asyncio.sleep(2.5)
                    self.assertFalse(lock.lost.is_set(), lock.lost_reason)
                    lock.check()
                    self.assertGreater(await lock.extend(), 0.5)
                    self.assertTrue((await c.status(name)).held)
                self.assertTrue(lock.release_confirmed)
                self.assertFalse((await c.status(name)).held)
                sem = unique("aio-sem-held-" + keepalive)
                async with c.semaphore(sem, 2, ttl=1, keepalive=keepalive) as p:
                    await asyncio.sleep(2.2)
                    self.assertFalse(p.lost.is_set(), p.lost_reason)
                    self.assertEqual(p.fencing_token % 1024, p.slot)
                    self.assertFalse(await p.locked())
                self.assertEqual((await c.semaphore_status(sem)).held, 0)
        a, b = unique("aio-lset-a"), unique("aio-lset-b")
        async with c.locks([a, b], ttl=1) as s:
            await asyncio.sleep(2.2)
            self.assertFalse(s.lost.is_set(), s.lost_reason)
            self.assertTrue(await s.locked())
            self.assertEqual(set(s.fencing_tokens), {a, b})
        self.assertFalse((await c.status(a)).held)
        async with c.rlock(unique("aio-rlock"), ttl=1) as r:
            async with r:
                self.assertEqual(r.holds, 2)
            self.assertEqual(r.holds, 1)

    async def test_lost_paths(self):
        """Released by someone else (on_lost, a coroutine, called), a majority of masters
        frozen (lost before the deadline), a late grant confirmed."""
        c = self.client
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                called = asyncio.Event()

                async def on_lost():
                    called.set()
                name = unique("aio-stolen-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost):
                    async with c.lock(name, ttl=0.9, keepalive=keepalive,
                                      on_lost=on_lost) as lock:
                        await c.release(name, lock.lease)
                        await asyncio.wait_for(lock.lost.wait(), 3)
                        await asyncio.wait_for(called.wait(), 3)
                name = unique("aio-freeze-" + keepalive)
                with self.assertRaises(redlockd.LeaseLost):
                    async with c.lock(name, ttl=2, keepalive=keepalive) as lock:
                        with Frozen(3):
                            deadline = lock.deadline
                            await asyncio.wait_for(lock.lost.wait(), 5)
                            self.assertLess(lock.lost_at, deadline + 1e-9)
                name = unique("aio-late-" + keepalive)
                await c.acquire(name, ttl=1.5)      # left to expire
                async with c.lock(name, ttl=1, wait=5, keepalive=keepalive) as lock:
                    self.assertLess(lock.grant.remaining(), lock.validity / 2)
                    self.assertTrue(lock.owned())

    async def test_election(self):
        c = self.client
        name = unique("aio-elect")
        a = c.election(name, value="A", ttl=1)
        b = c.election(name, value="B", ttl=1)
        seen = []

        async def observe():
            async for leader in c.election(name).observe(wait=5):
                seen.append(leader.owner if leader else None)
                if seen[-1] == "B":
                    return
        obs = asyncio.ensure_future(observe())
        await a.campaign(timeout=5)
        self.assertTrue(a.is_leader())
        with self.assertRaises(redlockd.LockHeld):
            await b.campaign(timeout=0.3)
        await a.proclaim("A2")
        self.assertEqual((await b.leader()).owner, "A2")
        bc = asyncio.ensure_future(b.campaign(timeout=10))
        await asyncio.sleep(1.2)
        self.assertFalse(a.lost.is_set(), a.lost_reason)
        self.assertTrue(await a.resign())
        await asyncio.wait_for(bc, 10)
        self.assertTrue(b.is_leader())
        self.assertGreater(b.fencing_token, 0)
        async with b:
            pass
        self.assertFalse(b.is_leader())
        await asyncio.wait_for(obs, 10)
        self.assertIn("B", seen)


class AsyncNoBelieverAfterANewHolder(unittest.IsolatedAsyncioTestCase):
    """Issue 29 for the asyncio client: the paused instance behind a 0.8 s delay, and a
    trickle, each keep-alive (as test_faults does for the blocking client)."""

    async def asyncSetUp(self):
        require_stack(self)
        self.client = aio.AsyncClient(RELAY_URL, token=TOKEN, timeout=5)

    async def asyncTearDown(self):
        await self.client.close()

    async def _judge(self, lock, poller, what):
        try:
            ok = await asyncio.get_running_loop().run_in_executor(None, poller.join, 20)
            self.assertTrue(ok, "B was not granted within 20 s")
            self.assertTrue(lock.lost.is_set(), "B holds it and A's holder still believes")
            self.assertLess(lock.lost_at, poller.granted_recv)
            margin = poller.granted_send - lock.lost_at
            if margin <= 0:
                self.assertTrue(lock.let_go_at is not None
                                and lock.lost_at <= lock.let_go_at < poller.granted_recv)
            report("asyncio: " + what, margin)
        finally:
            poller.stop()
            try:
                await lock.release()
            except redlockd.LeaseLost:
                pass

    async def test_paused_instance_delay_800ms(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("aio-pause-" + keepalive)
                with Relay() as relay, StoppedInstance(0) as a:
                    relay.command("delay down 800")
                    lock = self.client.lock(name, ttl=3, keepalive=keepalive)
                    await lock.acquire()
                    a.stop()
                    await self._judge(lock, Poller(URL_B, name).start(),
                                      "A paused, %s, delay 0.80 s" % keepalive)

    async def test_trickled_answers(self):
        for keepalive in ("stream", "extend"):
            with self.subTest(keepalive=keepalive):
                name = unique("aio-trickle-" + keepalive)
                with Relay() as relay:
                    lock = self.client.lock(name, ttl=3, keepalive=keepalive)
                    await lock.acquire()
                    relay.command("trickle down 50")
                    await self._judge(lock, Poller(URL_B, name).start(),
                                      "trickle 50 ms/byte, " + keepalive)
                await self.client.close()     # its connections trickled


if __name__ == "__main__":
    unittest.main()
