"""A Python worker taking turns on one lock with a Node process, and a Java Redisson process when
Java is installed (run by `./dev demo`). Arguments: the Redis URL, the epoch ms to start at."""

import os
import subprocess
import sys
import time

import crosslock

url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
start = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
client = crosslock.connect(url)
lock = client.lock("demo:orders")
time.sleep(max(0.0, start - time.time()))


def show_in_redis() -> None:
    """What Redis holds right now, as redis-cli shows it: Redisson's RLock layout."""
    for command in (["HGETALL", "demo:orders"], ["PTTL", "demo:orders"]):
        reply = subprocess.run(["redis-cli", "-u", url, *command], capture_output=True, text=True).stdout.split()
        print(f"              redis> {' '.join(command)}  →  {' '.join(reply)}", flush=True)


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
        if turn == 0:
            show_in_redis()
        time.sleep(0.3)
    time.sleep(0.4)  # out for longer than one hold: the others take their turns

client.close()
