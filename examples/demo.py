"""A Python worker taking turns on one lock with a Node process (run by `./dev demo`)."""

import os
import sys
import time

import crosslock

url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
client = crosslock.connect(url)
lock = client.lock("demo:orders")

for turn in range(3):
    asked = time.monotonic()
    with lock:
        waited = (time.monotonic() - asked) * 1000
        now = time.time()
        print(
            f"{time.strftime('%H:%M:%S', time.gmtime(now))}.{int(now * 1000) % 1000:03d}  python (pid {os.getpid()}) "
            f"holds demo:orders as {client.holder()}  (waited {waited:.0f} ms)",
            flush=True,
        )
        time.sleep(0.3)
    time.sleep(0.05)  # let the other side in

client.close()
