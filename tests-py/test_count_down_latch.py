"""crosslock.CountDownLatch: setting and counting down, waits with a limit, and waiters in three
separate Python processes all released by the one count_down that reaches zero."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import crosslock
from support import python_env, wait_until


def latch_channel(name: str) -> str:
    return f"redisson_countdownlatch__channel__{{{name}}}"


def test_set_count_and_count_down(client, raw, redis_server):
    name = "workers-ready"
    latch = client.count_down_latch(name)
    assert latch.count() == 0  # absent: open
    assert latch.try_set_count(3) is True
    assert latch.try_set_count(5) is False  # counting already: unchanged
    assert raw.command("GET", name) == "3" and latch.count() == 3
    assert latch.count_down() == 2
    assert latch.count_down() == 1
    assert raw.command("GET", name) == "1"
    with redis_server.raw() as sub:
        sub.subscribe(latch_channel(name))
        assert latch.count_down() == 0
        assert sub.next_message(timeout=10) == ["message", latch_channel(name), "0"]
    assert latch.count() == 0 and raw.command("EXISTS", name) == 0
    assert latch.count_down() == 0  # counting down an open latch changes nothing
    assert raw.command("EXISTS", name) == 0
    assert latch.try_set_count(1) is True  # open again: may be set again
    assert latch.delete() is True and latch.delete() is False
    assert raw.command("KEYS", "*") == []
    with pytest.raises(crosslock.InvalidArgumentError):
        latch.try_set_count(0)


def test_wait_with_a_limit(client, url, raw):
    name = "gate"
    latch = client.count_down_latch(name)
    assert latch.wait(timeout=0) is True  # an open latch does not wait
    assert latch.wait(timeout=5) is True
    assert latch.try_set_count(1)
    started = time.monotonic()
    assert latch.wait(timeout=0.3) is False
    assert time.monotonic() - started >= 0.25  # it did wait
    assert latch.count() == 1  # waiting changes nothing
    result: dict[str, Any] = {}

    def waiter() -> None:
        with crosslock.connect(url) as other:
            result["opened"] = other.count_down_latch(name).wait(timeout=600)

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: raw.numsub(latch_channel(name)) == 1, what="the waiter to subscribe")
    assert "opened" not in result
    latch.count_down()
    t.join(10)
    assert not t.is_alive() and result["opened"] is True  # woken by the count down, not its limit


async def test_asyncio_wait(client, raw):
    name = "async-gate"
    latch = client.count_down_latch(name)
    assert await latch.try_set_count_async(2)
    waiting = asyncio.create_task(latch.wait_async(timeout=600))
    await asyncio.sleep(0)
    assert await latch.wait_async(timeout=0.2) is False
    assert await latch.count_down_async() == 1
    assert not waiting.done()
    assert await latch.count_async() == 1
    assert await latch.count_down_async() == 0
    assert await asyncio.wait_for(waiting, 10) is True


WAITER = textwrap.dedent(
    """
    import sys, crosslock
    client = crosslock.connect(sys.argv[1])
    opened = client.count_down_latch(sys.argv[2]).wait(timeout=600)
    print("released", opened, flush=True)
    """
)


def test_waiters_in_three_processes_are_all_released_by_one_count_down(client, url, raw):
    name = "start-line"
    latch = client.count_down_latch(name)
    assert latch.try_set_count(2)
    assert latch.count_down() == 1
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WAITER, url, name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=python_env(),
        )
        for _ in range(3)
    ]
    try:
        # Each process waits on its own connection: three subscriptions.
        wait_until(lambda: raw.numsub(latch_channel(name)) == 3, timeout=30, what="three waiting processes")
        assert all(child.poll() is None for child in children)  # still waiting
        assert latch.count_down() == 0
        outputs = [child.communicate(timeout=30) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    assert [out for out, _ in outputs] == ["released True\n"] * 3, outputs
    assert [child.returncode for child in children] == [0, 0, 0]
    assert raw.command("EXISTS", name) == 0
