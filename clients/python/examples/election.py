"""The README's election example: python3 examples/election.py (REDLOCK_URL,
REDLOCK_TOKEN).  Two campaigners in one process (threads), for the example's sake."""
import threading

import redlockd

client = redlockd.Client()
a = client.election("scheduler", value="node-a", ttl=3)
b = client.election("scheduler", value="node-b", ttl=3)
a.campaign()
print("a leads:", a.leader())
t = threading.Thread(target=b.campaign)     # b campaigns meanwhile: it waits
t.start()
a.resign()                                  # a steps down: b leads at once
t.join()
print("b leads:", b.leader(), "lost:", b.lost.is_set())
b.resign()
print("now:", b.leader())
