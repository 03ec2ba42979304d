"""GroupLock beside Redisson's ``getMultiLock(group, values)`` (RedissonFasterMultiLock): the same
fields for the same values (Kryo5Codec and StringCodec), exclusion on overlapping value sets and
none on disjoint ones, re-entry counts, watchdog renewal, and a release on one side waking a
waiter on the other."""

from __future__ import annotations

import threading
import urllib.parse

import crosslock
from java_driver import JavaDriver
from support import Raw, wait_until

WITHIN = 20.0  # seconds a wake-up may take before the test fails (leases are 30 s)

VALUES = ["", "a", "orders:42", "héllo", "日本語", "😀", "y" * 32, "y" * 33, "x" * 200, "with space, comma"]


def word(value: str) -> str:
    """A value as the driver takes it (URL-encoded, so spaces and commas survive)."""
    return urllib.parse.quote(value, safe="")


def java_name(group: str, values: list[str]) -> str:
    return f"{group}/{','.join(word(v) for v in values)}"


def test_values_name_the_same_fields_as_redisson_with_either_codec(java: JavaDriver, client, redis_url: str):
    for value in VALUES:
        expected = java.ok(f"groupField {word(value)}" if value else "groupField")
        assert client.group_lock("g", [value]).fields == (expected,), value
    java.ok(f"connect {redis_url} -1 string", timeout=60)
    for value in VALUES:
        expected = java.ok(f"groupField {word(value)}" if value else "groupField")
        assert client.group_lock("g", [value], codec="string").fields == (expected,), value


def test_overlapping_sets_exclude_and_disjoint_sets_do_not(java: JavaDriver, client, raw: Raw):
    java.ok("kind group")
    java.ok(f"lock {java_name('orders', ['1', 'héllo'])}")
    holder = java.holder()
    assert raw.command("HGET", "orders", client.group_lock("orders", ["héllo"]).fields[0]) == holder

    assert not client.group_lock("orders", ["héllo", "3"]).acquire(blocking=False)
    ours = client.group_lock("orders", ["3", "4"])
    assert ours.acquire(blocking=False), "a disjoint set of the group is free"
    assert java.ok(f"tryLock {java_name('orders', ['4', '5'])}") == "false", "Java took a value we hold"
    assert java.ok(f"tryLock {java_name('orders', ['5', '6'])}") == "true"
    java.ok(f"unlock {java_name('orders', ['5', '6'])}")
    ours.release()
    java.ok(f"unlock {java_name('orders', ['1', 'héllo'])}")
    assert raw.command("EXISTS", "orders") == 0


def test_reentry_counts_on_both_sides(java: JavaDriver, client, raw: Raw):
    java.ok("kind group")
    name = java_name("re", ["a", "b"])
    java.ok(f"lock {name}")
    java.ok(f"lock {name}")
    field = client.group_lock("re", ["a"]).fields[0]
    assert raw.command("HGET", "re", f"{field}:{java.holder()}:lock_count") == "2"
    lock = client.group_lock("re", ["b", "c"])
    java.ok(f"unlock {name}")
    assert not lock.acquire(blocking=False), "Java still holds it once"
    java.ok(f"unlock {name}")

    assert lock.acquire(blocking=False) and lock.acquire(blocking=False)
    assert raw.command("HGET", "re", f"{lock.fields[0]}:{client.holder()}:lock_count") == "2"
    lock.release()
    assert java.ok(f"tryLock {java_name('re', ['c'])}") == "false", "we still hold it once"
    lock.release()
    assert java.ok(f"tryLock {java_name('re', ['c'])}") == "true"
    java.ok(f"unlock {java_name('re', ['c'])}")


def expiry(raw: Raw, group: str, field: str, holder: str) -> int:
    return int(raw.command("HGET", group, f"{field}:{holder}:expire_time") or 0)


def test_the_watchdog_of_either_side_keeps_the_other_out(java: JavaDriver, fast_client, raw: Raw, redis_url: str):
    java.ok(f"connect {redis_url} 600", timeout=60)
    java.client_id = java.ok("clientid")
    java.ok("kind group")
    java.ok(f"lock {java_name('wd', ['j'])}")
    field = fast_client.group_lock("wd", ["j"]).fields[0]
    first = expiry(raw, "wd", field, java.holder())
    wait_until(lambda: expiry(raw, "wd", field, java.holder()) > first + 600, what="Redisson to renew twice")
    assert not fast_client.group_lock("wd", ["j"]).acquire(blocking=False)
    java.ok(f"unlock {java_name('wd', ['j'])}")

    ours = fast_client.group_lock("wd", ["p"])
    assert ours.acquire()
    first = expiry(raw, "wd", ours.fields[0], fast_client.holder())
    wait_until(lambda: expiry(raw, "wd", ours.fields[0], fast_client.holder()) > first + 600, what="our watchdog to renew twice")
    assert java.ok(f"tryLock {java_name('wd', ['p'])}") == "false"
    assert not ours.lost
    ours.release()


def test_a_java_release_wakes_our_waiter(java: JavaDriver, client, raw: Raw):
    java.ok("kind group")
    java.ok(f"lock {java_name('wake', ['1', '2'])}")
    lock = client.group_lock("wake", ["2", "3"])
    result: dict[str, object] = {}

    def take() -> None:
        result["acquired"] = bool(lock.acquire(timeout=WITHIN))
        if result["acquired"]:
            lock.release()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub("redisson_lock__channel:{wake}") >= 1, what="our waiter to subscribe")
    java.ok(f"unlock {java_name('wake', ['1', '2'])}")
    t.join(WITHIN)
    assert result["acquired"] is True, "the Java release did not wake our waiter before its lease ran out"


def test_our_release_wakes_a_java_waiter(java: JavaDriver, client, raw: Raw):
    lock = client.group_lock("wake2", ["x"])
    assert lock.acquire()
    java.ok("kind group")
    java.send(f"tryLockWait {java_name('wake2', ['x', 'y'])} {int(WITHIN * 1000)} -1")
    wait_until(lambda: raw.numsub("redisson_lock__channel:{wake2}") >= 1, what="Redisson to subscribe")
    assert not java.has_reply()
    lock.release()
    assert java.expect_ok(java.reply(timeout=WITHIN)) == "true"
    assert raw.command("HGET", "wake2", lock.fields[0]) == java.holder()
    java.ok(f"unlock {java_name('wake2', ['x', 'y'])}")
