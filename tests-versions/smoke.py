"""The smoke run on each CPython: the installed wheel (not the checkout) connects, takes a lock from
a thread and from an asyncio task, takes and gives back a semaphore's permits, and closes."""

import asyncio
import sys

import crosslock

assert "site-packages" in crosslock.__file__, crosslock.__file__
url = sys.argv[1]
version = sys.version.split()[0]  # one server serves every interpreter's run
with crosslock.connect(url) as client:
    lock = client.lock(f"smoke:lock:{version}")
    with lock:
        assert lock.is_held() and lock.hold_count() == 1
    assert not lock.locked()
    semaphore = client.semaphore(f"smoke:semaphore:{version}")
    assert semaphore.try_set_permits(2)
    assert semaphore.acquire(2, timeout=5)
    assert semaphore.available_permits() == 0
    semaphore.release(2)
    assert semaphore.available_permits() == 2

    async def in_a_task() -> None:
        async with client.lock(f"smoke:async:{version}"):
            assert await client.lock(f"smoke:async:{version}").is_held_async()

    asyncio.run(in_a_task())
print("smoke ok", sys.version.split()[0])
