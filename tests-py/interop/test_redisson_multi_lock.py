"""MultiLock and RedLock beside Redisson: a part held by a Java RLock blocks our MultiLock until
Java releases it (the release wakes our waiting part), and while we hold the whole, Java's RLock on
any part is refused."""

from __future__ import annotations

import threading

import crosslock
from java_driver import JavaDriver
from support import Raw, wait_until

WITHIN = 20.0  # seconds a wake-up may take before the test fails (leases are 30 s)


def test_a_java_rlock_on_one_part_blocks_our_multi_lock_until_java_releases(java: JavaDriver, client, raw: Raw):
    names = ["multi:java:a", "multi:java:b", "multi:java:c"]
    java.ok(f"lock {names[1]}")
    multi = crosslock.MultiLock([client.lock(n) for n in names])
    assert not multi.acquire(timeout=0.3)  # nothing taken while Java holds a part
    assert raw.command("EXISTS", names[0]) == 0 and raw.command("EXISTS", names[2]) == 0

    result: dict[str, object] = {}
    done = threading.Event()

    def take() -> None:  # the holder is this thread, so it releases here too
        result["acquired"] = multi.acquire(timeout=WITHIN)
        result["holder"] = client.holder()
        done.wait(WITHIN)
        if result["acquired"]:
            multi.release()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    # Redisson's order: the first part is taken, the second waited for.
    wait_until(lambda: raw.command("EXISTS", names[0]) == 1, what="our first part to be taken")
    assert t.is_alive() and "acquired" not in result
    java.ok(f"unlock {names[1]}")
    wait_until(lambda: "holder" in result, timeout=WITHIN, what="our multi-lock to be woken")
    assert result["acquired"]
    for n in names:
        assert raw.hgetall(n) == {result["holder"]: "1"}
        assert java.ok(f"tryLock {n}") == "false", f"Java took {n} while our multi-lock held it"
    done.set()
    t.join(WITHIN)
    assert all(raw.command("EXISTS", n) == 0 for n in names)
