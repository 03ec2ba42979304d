"""The Python side of crosslock's benchmarks: one process, one library, one scenario.

bench/harness.py runs it (with bench/.venv's interpreter). In-process scenarios print one JSON
object; multi-process scenarios speak a line protocol on stdin/stdout (see bench/README.md).

    worker.py uncontended LIB URL --name N --seconds S --repeats R --warmup-batch B
    worker.py contended   LIB URL --name N --workers W --iters K      (threads or asyncio tasks)
    worker.py proc        LIB URL --name N --iters K [--permits P]    (one of W processes; P: a semaphore)
    worker.py handoff     LIB URL --name N
    worker.py holders     LIB URL --name N --n COUNT --watchdog-ms MS
    worker.py rtt         crosslock URL --name N --calls C --repeats R  (per-call breakdown)

LIB is one of: crosslock, crosslock+metrics (crosslock with its OpenTelemetry metrics on),
crosslock+spans (with its OpenTelemetry spans on),
crosslock-asyncio, redis-py, redis-py-asyncio, python-redis-lock, pottery. Every library runs with its own defaults (wait strategy, retry delays); only where a
default is "never expires" do we give a 10 s lease, as any real user would.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import threading
import time

LEASE_S = 10  # for peers whose default is no expiry at all; crosslock uses its watchdog instead


# --------------------------------------------------------------------------------------------
# Libraries: a factory per library, giving lock objects with acquire()/release() (sync) or
# acquire()/release() coroutines (async).


class Lib:
    is_async = False

    def __init__(self, url: str):
        self.url = url

    def make(self, name: str):
        raise NotImplementedError

    def close(self):
        pass


class CrosslockSync(Lib):
    def __init__(self, url, watchdog_ms=None):
        super().__init__(url)
        import crosslock

        kwargs = {} if watchdog_ms is None else {"watchdog_timeout": watchdog_ms / 1000}
        self.client = crosslock.connect(url, **kwargs)

    def make(self, name):
        return self.client.lock(name)

    def close(self):
        self.client.close()


class CrosslockMetricsSync(CrosslockSync):
    """crosslock with its OpenTelemetry metrics on: `connect(url, metrics=provider)`, an SDK
    MeterProvider read by an in-memory reader (nothing exported: the cost measured is recording)."""

    def __init__(self, url, watchdog_ms=None):
        Lib.__init__(self, url)
        import crosslock
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        kwargs = {} if watchdog_ms is None else {"watchdog_timeout": watchdog_ms / 1000}
        self.client = crosslock.connect(url, metrics=self.provider, **kwargs)

    def close(self):
        self.client.close()
        self.provider.shutdown()


class CrosslockSpansSync(CrosslockSync):
    """crosslock with its OpenTelemetry spans on: `connect(url, spans=provider)`, an SDK
    TracerProvider whose simple processor hands every ended span to an exporter that drops it
    (nothing exported: the cost measured is making them)."""

    def __init__(self, url, watchdog_ms=None):
        Lib.__init__(self, url)
        import crosslock
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

        class Dropped(SpanExporter):
            def export(self, spans):
                return SpanExportResult.SUCCESS

        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(Dropped()))
        kwargs = {} if watchdog_ms is None else {"watchdog_timeout": watchdog_ms / 1000}
        self.client = crosslock.connect(url, spans=self.provider, **kwargs)

    def close(self):
        self.client.close()
        self.provider.shutdown()


class CrosslockFairSync(CrosslockSync):
    """crosslock's FairLock: waiters served in the order they asked, each woken on its own channel."""

    def make(self, name):
        return self.client.fair_lock(name)


class _CrosslockPermit:
    """One permit of a crosslock Semaphore, with the lock interface the scenarios use."""

    __slots__ = ("sem",)

    def __init__(self, sem):
        self.sem = sem

    def acquire(self):
        return self.sem.acquire()

    def release(self):
        self.sem.release()


class CrosslockSemaphore(CrosslockSync):
    """crosslock's Semaphore (Redisson's RSemaphore layout; the harness sets the permits)."""

    def make(self, name):
        return _CrosslockPermit(self.client.semaphore(name))


class _CrosslockAsyncLock:
    __slots__ = ("lock",)

    def __init__(self, lock):
        self.lock = lock

    async def acquire(self):
        return await self.lock.acquire_async()

    async def release(self):
        await self.lock.release_async()


class CrosslockAsync(CrosslockSync):
    is_async = True

    def make(self, name):
        return _CrosslockAsyncLock(self.client.lock(name))


class RedisPySync(Lib):
    def __init__(self, url):
        super().__init__(url)
        import redis

        self.r = redis.Redis.from_url(url)

    def make(self, name):
        # Defaults: sleep=0.1 between tries, blocking forever; timeout (lease) defaults to None
        # (never expires), so give it a lease.
        return self.r.lock(name, timeout=LEASE_S)

    def close(self):
        self.r.close()


class RedisPyAsync(Lib):
    is_async = True

    def __init__(self, url):
        super().__init__(url)
        import redis.asyncio

        self.r = redis.asyncio.Redis.from_url(url)

    def make(self, name):
        return self.r.lock(name, timeout=LEASE_S)

    def close(self):
        pass  # closed by the event loop's end; aclose() needs the loop


class PythonRedisLock(Lib):
    def __init__(self, url):
        super().__init__(url)
        import redis
        import redis_lock

        self.redis_lock = redis_lock
        self.r = redis.Redis.from_url(url)

    def make(self, name):
        # Defaults: BLPOP on a signal list; expire defaults to None (never expires).
        return self.redis_lock.Lock(self.r, name, expire=LEASE_S)

    def close(self):
        self.r.close()


class PotteryLib(Lib):
    def __init__(self, url):
        super().__init__(url)
        import redis
        from pottery import Redlock

        self.Redlock = Redlock
        self.r = redis.Redis.from_url(url)

    def make(self, name):
        # Defaults: auto_release_time=10 s, sleeps random 0-0.2 s between tries, one master.
        return self.Redlock(key=name, masters={self.r})

    def close(self):
        self.r.close()


LIBS = {
    "crosslock": CrosslockSync,
    "crosslock-asyncio": CrosslockAsync,
    "crosslock+metrics": CrosslockMetricsSync,
    "crosslock+spans": CrosslockSpansSync,
    "crosslock-fair": CrosslockFairSync,
    "crosslock-semaphore": CrosslockSemaphore,
    "redis-py": RedisPySync,
    "redis-py-asyncio": RedisPyAsync,
    "python-redis-lock": PythonRedisLock,
    "pottery": PotteryLib,
}


def make_lib(name: str, url: str) -> Lib:
    try:
        return LIBS[name](url)
    except KeyError:
        raise SystemExit(f"unknown library {name!r}; one of {', '.join(LIBS)}")


# --------------------------------------------------------------------------------------------
# Helpers


def pct_us(sorted_ns, q):
    """Nearest-rank percentile of sorted nanoseconds, in microseconds."""
    if not sorted_ns:
        return 0.0
    import math

    rank = min(max(math.ceil(q * len(sorted_ns)), 1), len(sorted_ns))
    return sorted_ns[rank - 1] / 1000


def rss_kb() -> int:
    gc.collect()  # what holding locks retains, not cycles awaiting collection (as Node's gc())
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def say(line: str):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def settled(rates):
    n = len(rates)
    return n >= 3 and abs(rates[-1] - rates[-2]) <= 0.05 * rates[-2]


# --------------------------------------------------------------------------------------------
# Scenario 1: uncontended pairs


def uncontended_sync(lib, name, seconds, repeats, batch):
    lock = lib.make(name)
    clock = time.perf_counter_ns
    rates, warm_start = [], time.monotonic()
    while True:
        t0 = clock()
        for _ in range(batch):
            lock.acquire()
            lock.release()
        rates.append(batch / ((clock() - t0) / 1e9))
        if settled(rates) or len(rates) >= 20 or time.monotonic() - warm_start > 5:
            break
    runs = []
    limit = int(seconds * 1e9)
    for _ in range(repeats):
        lat = []
        start = clock()
        while True:
            t0 = clock()
            lock.acquire()
            lock.release()
            t1 = clock()
            lat.append(t1 - t0)
            if t1 - start >= limit:
                break
        runs.append(summarize_pairs(lat, (clock() - start) / 1e9))
    return {"runs": runs, "warmup": {"batch": batch, "rates": rates}}


async def uncontended_async(lib, name, seconds, repeats, batch):
    lock = lib.make(name)
    clock = time.perf_counter_ns
    rates, warm_start = [], time.monotonic()
    while True:
        t0 = clock()
        for _ in range(batch):
            await lock.acquire()
            await lock.release()
        rates.append(batch / ((clock() - t0) / 1e9))
        if settled(rates) or len(rates) >= 20 or time.monotonic() - warm_start > 5:
            break
    runs = []
    limit = int(seconds * 1e9)
    for _ in range(repeats):
        lat = []
        start = clock()
        while True:
            t0 = clock()
            await lock.acquire()
            await lock.release()
            t1 = clock()
            lat.append(t1 - t0)
            if t1 - start >= limit:
                break
        runs.append(summarize_pairs(lat, (clock() - start) / 1e9))
    return {"runs": runs, "warmup": {"batch": batch, "rates": rates}}


def summarize_pairs(lat, elapsed):
    lat.sort()
    return {
        "pairs": len(lat),
        "seconds": elapsed,
        "pairs_per_s": len(lat) / elapsed,
        "p50_us": pct_us(lat, 0.50),
        "p99_us": pct_us(lat, 0.99),
    }


# --------------------------------------------------------------------------------------------
# Scenario 3: contended, threads or asyncio tasks in this process


def contended_threads(lib, url, name, workers, iters):
    import redis

    r = redis.Redis.from_url(url)
    counter = f"{name}:counter"
    r.set(counter, 0)
    warm = lib.make(name)  # load scripts / warm connections before the clock starts
    warm.acquire()
    warm.release()
    barrier = threading.Barrier(workers + 1)
    results, errors = [None] * workers, []

    def work(i):
        lock = lib.make(name)
        max_wait = done = 0
        try:
            barrier.wait(timeout=60)
            for _ in range(iters):
                t0 = time.perf_counter_ns()
                lock.acquire()
                max_wait = max(max_wait, time.perf_counter_ns() - t0)
                v = int(r.get(counter) or 0)
                r.set(counter, v + 1)
                lock.release()
                done += 1
        except Exception as e:  # noqa: BLE001 - reported, and fails the run
            errors.append(repr(e))
        results[i] = (done, max_wait)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    barrier.wait(timeout=60)
    start = time.perf_counter_ns()
    for t in threads:
        t.join()
    elapsed = (time.perf_counter_ns() - start) / 1e9
    done = sum(d for d, _ in results)
    value = int(r.get(counter) or 0)
    return {
        "ops": done,
        "seconds": elapsed,
        "ops_per_s": done / elapsed,
        "counter": value,
        "expected": workers * iters,
        "max_wait_ms": max(w for _, w in results) / 1e6,
        "errors": errors,
    }


async def contended_tasks(lib, url, name, workers, iters):
    import redis.asyncio

    r = redis.asyncio.Redis.from_url(url)
    counter = f"{name}:counter"
    await r.set(counter, 0)
    warm = lib.make(name)
    await warm.acquire()
    await warm.release()
    go = asyncio.Event()
    errors = []

    async def work():
        lock = lib.make(name)
        max_wait = done = 0
        await go.wait()
        try:
            for _ in range(iters):
                t0 = time.perf_counter_ns()
                await lock.acquire()
                max_wait = max(max_wait, time.perf_counter_ns() - t0)
                v = int(await r.get(counter) or 0)
                await r.set(counter, v + 1)
                await lock.release()
                done += 1
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        return done, max_wait

    tasks = [asyncio.ensure_future(work()) for _ in range(workers)]
    await asyncio.sleep(0)
    start = time.perf_counter_ns()
    go.set()
    results = await asyncio.gather(*tasks)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    done = sum(d for d, _ in results)
    value = int(await r.get(counter) or 0)
    await r.aclose()
    return {
        "ops": done,
        "seconds": elapsed,
        "ops_per_s": done / elapsed,
        "counter": value,
        "expected": workers * iters,
        "max_wait_ms": max(w for _, w in results) / 1e6,
        "errors": errors,
    }


# --------------------------------------------------------------------------------------------
# Scenario 3: one of W processes (line protocol: ready -> "go" -> one JSON line)


def proc_sync(lib, url, name, iters, permits=None):
    """With ``permits`` (a semaphore), the work inside counts the holders at once (INCR, DECR of
    ``{name}:holders``) and reports the most it saw; otherwise it bumps a non-atomic counter."""
    import redis

    r = redis.Redis.from_url(url)
    counter, holders = f"{name}:counter", f"{name}:holders"
    lock = lib.make(name)
    r.ping()
    say("ready")
    if sys.stdin.readline().strip() != "go":
        return
    max_wait = done = max_holders = 0
    start = time.perf_counter_ns()
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        lock.acquire()
        max_wait = max(max_wait, time.perf_counter_ns() - t0)
        if permits:
            max_holders = max(max_holders, r.incr(holders))
            r.decr(holders)
        else:
            v = int(r.get(counter) or 0)
            r.set(counter, v + 1)
        lock.release()
        done += 1
    say(json.dumps({"done": done, "max_wait_ms": max_wait / 1e6, "max_holders": max_holders,
                    "seconds": (time.perf_counter_ns() - start) / 1e9}))


async def proc_async(lib, url, name, iters):
    import redis.asyncio

    r = redis.asyncio.Redis.from_url(url)
    counter = f"{name}:counter"
    lock = lib.make(name)
    await r.ping()
    say("ready")
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if line.strip() != "go":
        return
    max_wait = done = 0
    start = time.perf_counter_ns()
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        await lock.acquire()
        max_wait = max(max_wait, time.perf_counter_ns() - t0)
        v = int(await r.get(counter) or 0)
        await r.set(counter, v + 1)
        await lock.release()
        done += 1
    say(json.dumps({"done": done, "max_wait_ms": max_wait / 1e6,
                    "seconds": (time.perf_counter_ns() - start) / 1e9}))
    await r.aclose()


# --------------------------------------------------------------------------------------------
# Scenario 2: handoff (line protocol)
#   -> ready
#   <- acquire            -> waiting, then acquired <monotonic ns when acquire returned>
#   <- release <delay_us> -> sleeps delay, released <monotonic ns just before the release call>
#   <- quit               -> bye


def handoff_sync(lib, name):
    lock = lib.make(name)
    say("ready")
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "acquire":
            say("waiting")
            lock.acquire()
            t = time.monotonic_ns()
            say(f"acquired {t}")
        elif parts[0] == "release":
            time.sleep(int(parts[1]) / 1e6)
            t = time.monotonic_ns()
            lock.release()
            say(f"released {t}")
        elif parts[0] == "quit":
            break
    say("bye")


async def handoff_async(lib, name):
    lock = lib.make(name)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    say("ready")
    while True:
        line = await reader.readline()
        if not line:
            break
        parts = line.split()
        if not parts:
            continue
        if parts[0] == b"acquire":
            say("waiting")
            await lock.acquire()
            t = time.monotonic_ns()
            say(f"acquired {t}")
        elif parts[0] == b"release":
            await asyncio.sleep(int(parts[1]) / 1e6)
            t = time.monotonic_ns()
            await lock.release()
            say(f"released {t}")
        elif parts[0] == b"quit":
            break
    say("bye")


# --------------------------------------------------------------------------------------------
# Scenario 4: many holders (line protocol)
#   -> connected <rss_kb>
#   -> held <n> <watched> <rss_kb> <seconds to acquire>
#   <- report             -> report <watched> <rss_kb>
#   <- quit               -> bye


def holders(libname, url, name, n, watchdog_ms):
    if libname == "crosslock":
        lib = CrosslockSync(url, watchdog_ms=watchdog_ms)
        say(f"connected {rss_kb()}")
        locks = [lib.make(f"{name}:{i}") for i in range(n)]
        t0 = time.perf_counter()
        for lock in locks:
            lock.acquire()
        took = time.perf_counter() - t0
        watched = lambda: lib.client._native.watched_locks()  # noqa: E731
    elif libname == "python-redis-lock":
        import redis
        import redis_lock

        r = redis.Redis.from_url(url, max_connections=None)
        r.ping()
        say(f"connected {rss_kb()}")
        expire = max(1, round(watchdog_ms / 1000))  # whole seconds only; renews every 2/3 of it
        locks = [redis_lock.Lock(r, f"{name}:{i}", expire=expire, auto_renewal=True) for i in range(n)]
        t0 = time.perf_counter()
        for lock in locks:
            lock.acquire()
        took = time.perf_counter() - t0
        watched = lambda: sum(1 for l in locks if l._lock_renewal_thread is not None)  # noqa: E731
    else:
        raise SystemExit(f"holders: {libname} has no renewal to measure")
    say(f"held {n} {watched()} {rss_kb()} {took:.3f}")
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "report":
            say(f"report {watched()} {rss_kb()}")
        elif cmd == "quit":
            break
    say("bye")
    os._exit(0)  # don't wait for 10,000 releases or renewal threads on the way out


# --------------------------------------------------------------------------------------------
# Breakdown: per-call latency of single operations, to see where a pair's time goes


FLOOR_SCRIPT = "redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], ARGV[2]); return nil"


def rtt(url, name, calls, repeats):
    import redis
    import redis.asyncio

    c = CrosslockSync(url)
    lock = c.make(name)
    r = redis.Redis.from_url(url)
    sha = r.script_load(FLOOR_SCRIPT)
    fk = f"{name}:floor"
    clock = time.perf_counter_ns

    def one(fn):
        t = clock()
        fn()
        return clock() - t

    sync_ops = {
        "redis-py PING": lambda: one(r.ping),
        "redis-py EVALSHA": lambda: one(lambda: r.evalsha(sha, 1, fk, "f", 30000)),
        "crosslock locked()": lambda: one(lock.locked),
    }

    def pair(lease):
        t0 = clock()
        lock.acquire(lease=lease)
        t1 = clock()
        lock.release()
        return t1 - t0, clock() - t1

    async def async_round(n):
        ra = redis.asyncio.Redis.from_url(url)
        out = {"redis-py asyncio PING": [], "crosslock await locked_async()": [],
               "crosslock await acquire_async() (watchdog)": [], "crosslock await release_async() (watchdog)": []}
        for _ in range(n):
            t = clock()
            await ra.ping()
            out["redis-py asyncio PING"].append(clock() - t)
            t = clock()
            await lock.locked_async()
            out["crosslock await locked_async()"].append(clock() - t)
            t = clock()
            await lock.acquire_async()
            t1 = clock()
            await lock.release_async()
            out["crosslock await acquire_async() (watchdog)"].append(t1 - t)
            out["crosslock await release_async() (watchdog)"].append(clock() - t1)
        await ra.aclose()
        return out

    results: dict[str, list[list[int]]] = {}
    for rep in range(repeats + 1):  # round 0 warms up
        lat: dict[str, list[int]] = {}
        for _ in range(calls):
            for k, fn in sync_ops.items():
                lat.setdefault(k, []).append(fn())
            for label, lease in (("watchdog", None), ("lease", 10.0)):
                a, b = pair(lease)
                lat.setdefault(f"crosslock acquire() ({label})", []).append(a)
                lat.setdefault(f"crosslock release() ({label})", []).append(b)
        lat.update(asyncio.run(async_round(calls)))
        if rep:
            for k, v in lat.items():
                results.setdefault(k, []).append(v)
    # CPU time and context switches per call, process-wide (every thread, runtime threads too),
    # each operation in a block of its own.
    import resource

    def usage():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime, u.ru_nvcsw + u.ru_nivcsw

    def sync_pair(lease):
        def f():
            lock.acquire(lease=lease)
            lock.release()
        return f

    blocks = [
        ("redis-py PING", r.ping),
        ("redis-py EVALSHA", lambda: r.evalsha(sha, 1, fk, "f", 30000)),
        ("crosslock locked()", lock.locked),
        ("redis-py Lock pair", None),
        ("crosslock pair (watchdog)", sync_pair(None)),
        ("crosslock pair (lease)", sync_pair(10.0)),
    ]
    rl = r.lock(f"{name}:rp", timeout=10)

    def rp_pair():
        rl.acquire()
        rl.release()

    costs = []
    for label, fn in blocks:
        fn = fn or rp_pair
        for _ in range(max(10, calls // 10)):
            fn()
        (c0, s0), t0 = usage(), clock()
        for _ in range(calls):
            fn()
        (c1, s1), t1 = usage(), clock()
        costs.append({"op": label, "wall_us": (t1 - t0) / 1000 / calls,
                      "cpu_us": (c1 - c0) * 1e6 / calls, "cs": (s1 - s0) / calls})

    async def async_blocks():
        ra = redis.asyncio.Redis.from_url(url)
        rla = ra.lock(f"{name}:rpa", timeout=10)

        async def cl_pair():
            await lock.acquire_async()
            await lock.release_async()

        async def rp_pair_a():
            await rla.acquire()
            await rla.release()

        out = []
        for label, fn in [("redis-py asyncio PING", ra.ping), ("crosslock await locked_async()", lock.locked_async),
                          ("redis-py asyncio Lock pair", rp_pair_a), ("crosslock asyncio pair (watchdog)", cl_pair)]:
            for _ in range(max(10, calls // 10)):
                await fn()
            (c0, s0), t0 = usage(), clock()
            for _ in range(calls):
                await fn()
            (c1, s1), t1 = usage(), clock()
            out.append({"op": label, "wall_us": (t1 - t0) / 1000 / calls,
                        "cpu_us": (c1 - c0) * 1e6 / calls, "cs": (s1 - s0) / calls})
        await ra.aclose()
        return out

    costs += asyncio.run(async_blocks())
    c.close()
    ops = []
    for k, reps in results.items():
        ops.append({"op": k, "p50_us": [pct_us(sorted(v), 0.5) for v in reps],
                    "mean_us": [sum(v) / len(v) / 1000 for v in reps]})
    return {"ops": ops, "costs": costs}


# --------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["uncontended", "contended", "proc", "handoff", "holders", "rtt"])
    p.add_argument("lib")
    p.add_argument("url")
    p.add_argument("--name", default="bench:py")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup-batch", type=int, default=200)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--watchdog-ms", type=int, default=3000)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--permits", type=int, default=0)
    a = p.parse_args()

    if a.scenario == "rtt":
        print(json.dumps(rtt(a.url, a.name, a.calls, a.repeats)))
        return

    if a.scenario == "holders":
        return holders(a.lib, a.url, a.name, a.n, a.watchdog_ms)

    lib = make_lib(a.lib, a.url)
    if a.scenario == "uncontended":
        if lib.is_async:
            out = asyncio.run(uncontended_async(lib, a.name, a.seconds, a.repeats, a.warmup_batch))
        else:
            out = uncontended_sync(lib, a.name, a.seconds, a.repeats, a.warmup_batch)
        print(json.dumps(out))
    elif a.scenario == "contended":
        if lib.is_async:
            out = asyncio.run(contended_tasks(lib, a.url, a.name, a.workers, a.iters))
        else:
            out = contended_threads(lib, a.url, a.name, a.workers, a.iters)
        print(json.dumps(out))
    elif a.scenario == "proc":
        if lib.is_async:
            asyncio.run(proc_async(lib, a.url, a.name, a.iters))
        else:
            proc_sync(lib, a.url, a.name, a.iters, a.permits)
    elif a.scenario == "handoff":
        if lib.is_async:
            asyncio.run(handoff_async(lib, a.name))
        else:
            handoff_sync(lib, a.name)
    sys.stdout.flush()
    lib.close()


if __name__ == "__main__":
    main()
