"""Runs every benchmark scenario against one redis-server and writes the raw results as JSON.

bench/run.sh starts the server, prepares the environments and calls this with bench/.venv's
interpreter; bench/report.py then turns the JSON into bench/RESULTS.md.

    harness.py --url redis://127.0.0.1:PORT/0 --out results.json [--smoke] [--only SCENARIO,...]

Every child process runs under a time limit and is killed when it overstays; a crash, a wrong
counter or a timed-out wait is recorded as a failure, and the exit status is 1 if there was any.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import queue
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable
PY_WORKER = str(BENCH / "py" / "worker.py")
NODE_WORKER = str(BENCH / "node" / "worker.js")

# crosslock with its OpenTelemetry metrics on (Python: connect(url, metrics=an SDK MeterProvider);
# Rust: crosslock::telemetry::OpenTelemetry on an SDK meter; Node: connect(url, { metrics: an SDK
# MeterProvider })), in scenarios 1 and 2 only, beside plain crosslock: the cost of metrics as a
# paired ratio.
METRICS_LIB = "crosslock+metrics"
# crosslock with its OpenTelemetry spans on (an SDK TracerProvider whose simple processor hands
# every ended span to an exporter that drops it: what is measured is making them), likewise.
SPANS_LIB = "crosslock+spans"
PY_LIBS = ["crosslock", "crosslock-asyncio", "redis-py", "redis-py-asyncio", "python-redis-lock", "pottery"]
NODE_LIBS = ["crosslock", "redis-semaphore", "redlock"]
# The JavaScript runtimes the Node worker runs on (Bun and Deno: the repo's dev dependencies, the
# npm packages `bun` and `deno`), and the libraries scenario 9 runs on each of them.
JS_RUNTIMES = {
    "node": ["node"],
    "bun": [str(ROOT / "node_modules" / ".bin" / "bun")],
    "deno": [str(ROOT / "node_modules" / ".bin" / "deno"), "run", "-A"],
}
RUNTIME_LIBS = ["crosslock", "redis-semaphore"]
os.environ.setdefault("DENO_NO_UPDATE_CHECK", "1")
# The longest sleep between two tries of each polling peer (its default): the handoff test
# releases at a random moment over that span, so a poller's phase is sampled fairly.
POLL_SPAN_MS = {"redis-py": 100, "redis-py-asyncio": 100, "pottery": 200, "redlock": 300, "redis-semaphore": 10}

FAILURES: list[str] = []
CHILDREN: list[subprocess.Popen] = []


def log(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fail(msg: str):
    log(f"FAILURE: {msg}")
    FAILURES.append(msg)


# --------------------------------------------------------------------------------------------
# Commands of each language's worker


class Runner:
    def __init__(self, url: str, rust_bin: str):
        self.url = url
        self.rust_bin = rust_bin

    def cmd(self, lang: str, scenario: str, lib: str, **opts) -> list[str]:
        flags = []
        for k, v in opts.items():
            flags += [f"--{k.replace('_', '-')}", str(v)]
        if lang == "python":
            return [PY, PY_WORKER, scenario, lib, self.url, *flags]
        if lang == "node":
            # Holders reads RSS after a full collection (see worker.js rssKb).
            gc = ["--expose-gc"] if scenario == "holders" else []
            return ["node", *gc, NODE_WORKER, scenario, lib, self.url, *flags]
        if lang in ("bun", "deno"):
            return [*JS_RUNTIMES[lang], NODE_WORKER, scenario, lib, self.url, *flags]
        if lang == "rust":
            # crosslock-app: called from a task of the application's own tokio runtime.
            app = ["--runtime", "app"] if lib == "crosslock-app" else []
            # crosslock+metrics: its OpenTelemetry metrics on, recorded on an SDK meter.
            metrics = ["--metrics", "otel"] if lib == METRICS_LIB else []
            # crosslock+spans: its OpenTelemetry spans on, made on an SDK tracer.
            spans = ["--spans", "otel"] if lib == SPANS_LIB else []
            return [self.rust_bin, scenario, self.url, *flags, *app, *metrics, *spans]
        raise ValueError(lang)


def run_json(cmd: list[str], timeout: float, what: str):
    """Runs a worker that prints one JSON object; None (and a failure) if it does not."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=BENCH)
    except subprocess.TimeoutExpired:
        fail(f"{what}: no result within {timeout:.0f}s (killed)")
        return None
    if proc.returncode != 0:
        fail(f"{what}: exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
        return None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        fail(f"{what}: no JSON in output: {proc.stdout[-500:]!r} {proc.stderr[-1000:]!r}")
        return None


class Child:
    """A worker speaking a line protocol, read by a thread so every wait can time out."""

    def __init__(self, cmd: list[str], what: str):
        self.what = what
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, cwd=BENCH,
        )
        CHILDREN.append(self.proc)
        self.lines: queue.Queue = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self):
        for line in self.proc.stderr:
            self.err.append(line)
            del self.err[:-400]

    def send(self, line: str):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word: str, timeout: float) -> list[str]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.what}: no '{word}' within {timeout:.0f}s") from None
        if line is None:
            self.proc.wait(timeout=5)
            raise RuntimeError(
                f"{self.what}: exited ({self.proc.returncode}) while waiting for '{word}': "
                f"{''.join(self.err)[-1500:]}"
            )
        parts = line.split()
        if not parts or parts[0] != word:
            raise RuntimeError(f"{self.what}: expected '{word}', got {line!r}")
        return parts[1:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def finish(self, timeout: float = 15):
        try:
            self.send("quit")
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def kill_stragglers():
    for p in CHILDREN:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


# --------------------------------------------------------------------------------------------
# Scenario 5: the floor


SCRIPT = "redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], ARGV[2]); return nil"


def redis_benchmark(port: int, clients: int, n: int, command: list[str]) -> dict:
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n", str(n), "--csv", *command]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    if not rows:
        raise RuntimeError(f"redis-benchmark printed no CSV: {out!r}")
    row = rows[-1]
    return {k: float(v) for k, v in row.items() if k != "test"}


def floor_command(r: redis.Redis) -> list[str]:
    """The floor's command: one EVALSHA of a script as small as an acquire (HSET + PEXPIRE)."""
    return ["EVALSHA", r.script_load(SCRIPT), "1", "bench:floor", "field", "30000"]


def floor(cfg, r: redis.Redis, port: int) -> list[dict]:
    tests = [
        ("PING", ["PING"]),
        ("EVALSHA HSET+PEXPIRE", floor_command(r)),
    ]
    out = []
    for name, command in tests:
        for clients in (1, 8):
            what = f"floor {name} -c {clients}"
            try:
                # Size -n from a short probe so a run lasts about cfg.floor_seconds.
                probe = redis_benchmark(port, clients, cfg.floor_probe, command)
                n = int(min(max(probe["rps"] * cfg.floor_seconds, cfg.floor_probe), 5_000_000))
                runs = [redis_benchmark(port, clients, n, command) for _ in range(cfg.floor_repeats)]
            except Exception as e:  # noqa: BLE001
                fail(f"{what}: {e}")
                continue
            log(f"{what}: {[round(x['rps']) for x in runs]} ops/s (n={n})")
            out.append({"test": name, "clients": clients, "n": n, "runs": runs})
    return out


# --------------------------------------------------------------------------------------------
# Scenario 1: uncontended


FLOOR_KEY = ("floor", "redis-benchmark")


def uncontended(cfg, runner: Runner, plan: list[tuple[str, str]] | None = None,
                floor_at: tuple[int, list[str]] | None = None, repeats: int | None = None,
                label: str = "uncontended") -> list[dict]:
    """Every library once per round, the order rotating between rounds: a slow spell of the machine
    then hits all libraries alike instead of one library's whole series. With `floor_at` (the
    server's port and the floor's EVALSHA), the floor runs in the rotation too, as one more entry
    (FLOOR_KEY: redis-benchmark, one client, pairs/s = EVALSHA rate ÷ 2), so the Rust core's share
    of the floor is a per-round ratio like every other."""
    if plan is None:
        plan = [("rust", "crosslock"), ("rust", METRICS_LIB), ("rust", SPANS_LIB), ("rust", "crosslock-app")]
        plan += [("python", "crosslock"), ("python", METRICS_LIB), ("python", SPANS_LIB)]
        plan += [("python", lib) for lib in PY_LIBS[1:]]
        plan += [("node", "crosslock"), ("node", METRICS_LIB), ("node", SPANS_LIB)]
        plan += [("node", lib) for lib in NODE_LIBS[1:]]
    plan = [(lang, lib) for lang, lib in plan if cfg.want(lang, lib)]
    if floor_at and ("rust", "crosslock") in plan:
        plan.insert(plan.index(("rust", "crosslock")) + 1, FLOOR_KEY)
    floor_n = None
    acc: dict[tuple[str, str], dict] = {}
    broken: set[tuple[str, str]] = set()
    for rnd in range(cfg.repeats if repeats is None else repeats):
        k = rnd % max(1, len(plan))
        for lang, lib in plan[k:] + plan[:k]:
            if (lang, lib) in broken:
                continue
            what = f"{label} {lang}/{lib} (round {rnd + 1})"
            if (lang, lib) == FLOOR_KEY:
                port, command = floor_at
                try:
                    if floor_n is None:  # sized from a probe so a run lasts about cfg.seconds
                        probe = redis_benchmark(port, 1, cfg.floor_probe, command)
                        floor_n = int(min(max(probe["rps"] * cfg.seconds, cfg.floor_probe), 5_000_000))
                    rps = redis_benchmark(port, 1, floor_n, command)["rps"]
                except Exception as e:  # noqa: BLE001
                    fail(f"{what}: {e}")
                    broken.add(FLOOR_KEY)
                    continue
                entry = acc.setdefault(FLOOR_KEY, {"lang": lang, "lib": lib, "runs": [], "warmups": [None]})
                entry["runs"].append({"pairs_per_s": rps / 2, "evalsha_per_s": rps})
                continue
            batch = cfg.py_warmup_batch if lang == "python" else cfg.node_warmup_batch
            cmd = runner.cmd(lang, "uncontended", lib, name=f"bench:u:{lang}:{lib}",
                             seconds=cfg.seconds, repeats=1, warmup_batch=batch)
            res = run_json(cmd, cfg.timeout, what)
            if not res:
                broken.add((lang, lib))
                continue
            entry = acc.setdefault((lang, lib), {"lang": lang, "lib": lib, "runs": [], "warmups": []})
            entry["runs"] += res["runs"]
            entry["warmups"].append(res["warmup"])
        log(f"{label} round {rnd + 1}: " + ", ".join(
            f"{lang}/{lib} {acc[(lang, lib)]['runs'][-1]['pairs_per_s']:.0f}" for lang, lib in plan if (lang, lib) in acc))
    out = []
    for key in plan:
        if key in acc:
            entry = acc[key]
            entry["warmup"] = entry["warmups"][0]
            out.append(entry)
    return out


PINNED_PLAN = [("rust", "crosslock"), ("python", "crosslock"), ("python", "crosslock-asyncio"), ("python", "redis-py"),
               ("python", "redis-py-asyncio"), ("node", "crosslock"), ("node", "redis-semaphore")]


def runtimes(cfg, runner: Runner) -> list[dict]:
    """Scenario 1's Node rows for crosslock and redis-semaphore (on ioredis) again, each on Node,
    Bun and Deno, in one rotation: per-round ratios across runtimes and libraries. On Bun and Deno
    crosslock's lanes are watched by a thread of its runtime (their libuv is a stand-in), on Node
    by libuv."""
    plan = [(rt, lib) for rt in JS_RUNTIMES for lib in RUNTIME_LIBS]
    return uncontended(cfg, runner, plan, label="runtimes")


def uncontended_pinned(cfg, runner: Runner, r: redis.Redis, port: int) -> list[dict]:
    """Scenario 1 again with redis-server and every client process on one CPU, the lowest this
    process may use (the harness pins itself there, so the workers and redis-benchmark it starts
    inherit it; Redis's threads are pinned by id), for a few rounds. On a VM that halts an idle
    virtual CPU at once (the one these numbers come from does), each round trip across two CPUs
    wakes one from halt twice, and the woken code runs on cold caches; on one CPU nothing idles
    between a request and its reply, so what is left is each library's own work per pair, and the
    server's."""
    mine = os.sched_getaffinity(0)
    cpu = min(mine)  # CPU 0 unless this process may not run there
    server_pid = int(r.info("server")["process_id"])
    threads = [int(t) for t in os.listdir(f"/proc/{server_pid}/task")]
    before = {t: os.sched_getaffinity(t) for t in threads}
    try:
        try:
            for t in threads:
                os.sched_setaffinity(t, {cpu})
            os.sched_setaffinity(0, {cpu})
        except OSError as e:
            log(f"uncontended on one CPU: skipped, cannot pin Redis and this process to CPU {cpu}: {e}")
            return []
        return uncontended(cfg, runner, plan=PINNED_PLAN, floor_at=(port, floor_command(r)),
                           repeats=cfg.pinned_repeats, label="uncontended on one CPU")
    finally:
        os.sched_setaffinity(0, mine)
        for t, mask in before.items():
            try:
                os.sched_setaffinity(t, mask)
            except OSError:
                pass  # a thread Redis has ended meanwhile


# --------------------------------------------------------------------------------------------
# Scenario 2: handoff


def handoff_pair(cfg, cmd_a, cmd_b, what, rounds, repeats, span_ms) -> list[list[float]] | None:
    a, b = Child(cmd_a, what + " [A]"), Child(cmd_b, what + " [B]")
    try:
        a.expect("ready", 60)
        b.expect("ready", 60)
        holder, waiter = a, b
        holder.send("acquire")
        holder.expect("waiting", 30)
        holder.expect("acquired", 30)
        by_repeat = []
        for _ in range(repeats):
            lat = []
            for _ in range(rounds):
                waiter.send("acquire")
                waiter.expect("waiting", 30)
                # Give the waiter time to enter its wait (first try + subscribe), then release at
                # a random moment: for a poller, a random phase of its sleep.
                delay_us = random.randint(2000, 2000 + int(span_ms * 1000))
                holder.send(f"release {delay_us}")
                (t_rel,) = holder.expect("released", 30)
                (t_acq,) = waiter.expect("acquired", 30)
                lat.append((int(t_acq) - int(t_rel)) / 1000)
                holder, waiter = waiter, holder
            by_repeat.append(lat)
        holder.send("release 0")
        holder.expect("released", 30)
        return by_repeat
    except Exception as e:  # noqa: BLE001
        fail(f"{what}: {e}")
        return None
    finally:
        a.finish()
        b.finish()


def handoff(cfg, runner: Runner, plan: list[tuple[str, str, str, str]] | None = None) -> list[dict]:
    out = []
    if plan is None:
        plan = [("rust", lib, "rust", lib) for lib in ("crosslock", METRICS_LIB, SPANS_LIB)]
        plan += [("python", lib, "python", lib) for lib in ("crosslock", METRICS_LIB, SPANS_LIB)]
        plan += [("python", lib, "python", lib) for lib in PY_LIBS[1:]]
        plan += [("node", lib, "node", lib) for lib in ("crosslock", METRICS_LIB, SPANS_LIB)]
        plan += [("node", lib, "node", lib) for lib in NODE_LIBS[1:]]
        plan += [("python", "crosslock", "node", "crosslock")]  # one lock, two languages
    for lang_a, lib_a, lang_b, lib_b in plan:
        if not (cfg.want(lang_a, lib_a) and cfg.want(lang_b, lib_b)):
            continue
        cross = lang_a != lang_b
        what = f"handoff {lang_a}/{lib_a}" + (f" <-> {lang_b}/{lib_b}" if cross else "")
        name = f"bench:h:{lang_a}:{lang_b}:{lib_a}"
        span = POLL_SPAN_MS.get(lib_a, 3)
        slow = span >= 100
        rounds = cfg.handoff_rounds_slow if slow else cfg.handoff_rounds
        res = handoff_pair(cfg, runner.cmd(lang_a, "handoff", lib_a, name=name),
                           runner.cmd(lang_b, "handoff", lib_b, name=name), what, rounds, cfg.repeats, span)
        if res:
            pooled = sorted(x for lat in res for x in lat)
            log(f"{what}: p50 {pct(pooled, .5):.0f} us, p99 {pct(pooled, .99):.0f} us over {len(pooled)}")
            out.append({"lang": lang_a if not cross else f"{lang_a}->{lang_b}", "lib": lib_a,
                        "span_ms": span, "latencies_us": res})
    return out


def cluster(cfg, runner: Runner) -> dict:
    """crosslock's uncontended and handoff scenarios again, on a Redis Cluster (three masters with
    a replica each, on this machine): the price of slot routing next to the single-server rows."""
    langs = ["rust", "python", "node"]
    return {
        "uncontended": uncontended(cfg, runner, [(lang, "crosslock") for lang in langs]),
        "handoff": handoff(cfg, runner, [(lang, "crosslock", lang, "crosslock") for lang in langs]),
    }


def cpu_hog() -> subprocess.Popen:
    """A busy loop pinned to CPU 0 (one of the machine's cores kept busy), for the handoff under load."""
    def pin():
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)


def handoff_load(cfg, runner: Runner) -> list[dict]:
    """Scenario 2 again for crosslock only, with a CPU hog on one core: a busy machine's handoff."""
    out = []
    plan = [("rust", "crosslock"), ("python", "crosslock"), ("python", "crosslock-asyncio"), ("node", "crosslock")]
    hog = cpu_hog()
    try:
        for lang, lib in plan:
            if not cfg.want(lang, lib):
                continue
            what = f"handoff under load {lang}/{lib}"
            name = f"bench:hl:{lang}:{lib}"
            res = handoff_pair(cfg, runner.cmd(lang, "handoff", lib, name=name),
                               runner.cmd(lang, "handoff", lib, name=name), what, cfg.handoff_rounds,
                               cfg.repeats, POLL_SPAN_MS.get(lib, 3))
            if res:
                pooled = sorted(x for lat in res for x in lat)
                log(f"{what}: p50 {pct(pooled, .5):.0f} us, p99 {pct(pooled, .99):.0f} us over {len(pooled)}")
                out.append({"lang": lang, "lib": lib, "span_ms": POLL_SPAN_MS.get(lib, 3), "latencies_us": res})
    finally:
        hog.kill()
        hog.wait()
    return out


def pct(sorted_vals, q):
    import math

    if not sorted_vals:
        return 0.0
    rank = min(max(math.ceil(q * len(sorted_vals)), 1), len(sorted_vals))
    return sorted_vals[rank - 1]


# --------------------------------------------------------------------------------------------
# Scenario 3: contended


def contended_procs(cfg, runner, r, lang, lib, name, workers, iters, what, permits=0):
    counter = f"{name}:counter"
    r.set(counter, 0)
    extra = {"permits": permits} if permits else {}
    kids = [Child(runner.cmd(lang, "proc", lib, name=name, iters=iters, **extra), f"{what} #{i}")
            for i in range(workers)]
    try:
        for k in kids:
            k.expect("ready", 60)
        start = time.perf_counter()
        for k in kids:
            k.send("go")
        results = []
        deadline = start + cfg.timeout
        for k in kids:
            try:
                line = k.lines.get(timeout=max(1.0, deadline - time.perf_counter()))
            except queue.Empty:
                raise RuntimeError(f"{k.what}: not done within {cfg.timeout:.0f}s") from None
            if line is None:
                raise RuntimeError(f"{k.what}: exited: {''.join(k.err)[-1500:]}")
            results.append(json.loads(line))
        elapsed = time.perf_counter() - start
        done = sum(x["done"] for x in results)
        return {
            "ops": done, "seconds": elapsed, "ops_per_s": done / elapsed,
            "counter": int(r.get(counter) or 0), "expected": workers * iters,
            "max_wait_ms": max(x["max_wait_ms"] for x in results), "errors": [],
            "max_holders": max(x.get("max_holders", 0) for x in results),
        }
    except Exception as e:  # noqa: BLE001
        fail(f"{what}: {e}")
        return None
    finally:
        for k in kids:
            k.kill()


def contended(cfg, runner: Runner, r: redis.Redis) -> list[dict]:
    plan = [("rust", "tasks", "crosslock")]
    plan += [("python", "threads", lib) for lib in ["crosslock", "redis-py", "python-redis-lock", "pottery"]]
    plan += [("python", "tasks", lib) for lib in ["crosslock-asyncio", "redis-py-asyncio"]]
    plan += [("python", "processes", lib) for lib in ["crosslock", "redis-py", "python-redis-lock", "pottery"]]
    plan += [("node", "tasks", lib) for lib in NODE_LIBS]
    plan += [("node", "processes", lib) for lib in NODE_LIBS]
    # crosslock's FairLock beside its Lock: what first-come-first-served costs, and its max wait.
    plan += [(lang, mode, "crosslock-fair") for lang, mode in
             [("python", "threads"), ("python", "processes"), ("node", "tasks"), ("node", "processes")]]
    w = cfg.workers
    plan = [(lang, mode, lib) for lang, mode, lib in plan if cfg.want(lang, lib) and cfg.want_mode(mode)]
    acc: dict[tuple, list] = {}
    broken: set[tuple] = set()
    for rep in range(cfg.contended_repeats):  # rounds: every library once per round
        for key in plan:
            if key in broken:
                continue
            lang, mode, lib = key
            what = f"contended {lang}/{mode}/{lib}"
            name = f"bench:c:{lang}:{mode}:{lib}:{rep}"
            if mode == "processes":
                res = contended_procs(cfg, runner, r, lang, lib, name, w, cfg.iters, what)
            else:
                res = run_json(runner.cmd(lang, "contended", lib, name=name, workers=w, iters=cfg.iters),
                               cfg.timeout, what)
            if res is None:
                broken.add(key)
                continue
            actual = int(r.get(f"{name}:counter") or 0)
            res["exact"] = res["counter"] == res["expected"] == actual == res["ops"] and not res.get("errors")
            if not res["exact"]:
                fail(f"{what}: counter {actual} (worker saw {res['counter']}), expected {res['expected']}, "
                     f"ops {res['ops']}, errors {res.get('errors')}")
            log(f"{what} (round {rep + 1}): {res['ops_per_s']:.0f} ops/s, max wait {res['max_wait_ms']:.1f} ms, "
                f"exact={res['exact']}")
            acc.setdefault(key, []).append(res)
    # One more, untimed round of each process mode under MONITOR (which slows the server): the
    # Redis calls each library makes per operation, beside the counter's own GET and SET.
    calls: dict[tuple, dict] = {}
    port = r.connection_pool.connection_kwargs["port"]
    for key in plan:
        lang, mode, lib = key
        if mode != "processes" or key in broken:
            continue
        name = f"bench:c:{lang}:{mode}:{lib}:monitored"
        mon = Monitor(port)
        try:
            t0 = time.time()
            res = contended_procs(cfg, runner, r, lang, lib, name, w, cfg.iters, f"contended {lang}/{lib} (monitored)")
            time.sleep(0.2)  # let MONITOR's stream catch up
            seen = [c for _, c in mon.calls_between(t0, time.time())]
        finally:
            mon.close()
        if res is None or not res["ops"]:
            continue
        by: dict[str, int] = {}
        for c in seen:
            by[c] = by.get(c, 0) + 1
        ops = res["ops"]
        by["get"] = by.get("get", 0) - ops  # the counter's own work
        by["set"] = by.get("set", 0) - ops - 1  # and the harness's SET of the counter to 0
        by = {c: n for c, n in by.items() if n > 0}
        calls[key] = {"per_op": sum(by.values()) / ops, "by_command": {c: n / ops for c, n in by.items()}}
        log(f"contended {lang}/{mode}/{lib}: {calls[key]['per_op']:.1f} Redis calls per operation")
    return [{"lang": lang, "mode": mode, "lib": lib, "workers": w, "iters": cfg.iters, "runs": acc[(lang, mode, lib)],
             "calls": calls.get((lang, mode, lib))}
            for lang, mode, lib in plan if (lang, mode, lib) in acc]


# --------------------------------------------------------------------------------------------
# Scenario 7: a semaphore shared by W processes

SEM_PERMITS = 3


def semaphore(cfg, runner: Runner, r: redis.Redis) -> list[dict]:
    """W processes each take one permit K times out of SEM_PERMITS; inside, they count the holders
    at that moment (INCR/DECR on the server), so over-granting shows as more than SEM_PERMITS."""
    plan = [("python", "crosslock-semaphore"), ("node", "crosslock-semaphore"), ("node", "redis-semaphore-semaphore")]
    plan = [(lang, lib) for lang, lib in plan if cfg.want(lang, lib)]
    acc: dict[tuple, list] = {}
    for rep in range(cfg.contended_repeats):
        for lang, lib in plan:
            what = f"semaphore {lang}/{lib}"
            name = f"bench:s:{lang}:{lib}:{rep}"
            if lib.startswith("crosslock"):
                r.set(name, SEM_PERMITS)  # Redisson's layout: the available permits at the name
            res = contended_procs(cfg, runner, r, lang, lib, name, cfg.workers, cfg.iters, what, SEM_PERMITS)
            if res is None:
                continue
            res["expected"] = cfg.workers * cfg.iters
            back = int(r.get(name) or 0) if lib.startswith("crosslock") else SEM_PERMITS
            res["exact"] = res["ops"] == res["expected"] and res["max_holders"] <= SEM_PERMITS and back == SEM_PERMITS
            if not res["exact"]:
                fail(f"{what}: {res['ops']} of {res['expected']} done, up to {res['max_holders']} holders at once "
                     f"for {SEM_PERMITS} permits, {back} permits back")
            log(f"{what} (round {rep + 1}): {res['ops_per_s']:.0f} ops/s, max wait {res['max_wait_ms']:.1f} ms, "
                f"max holders {res['max_holders']}/{SEM_PERMITS}")
            acc.setdefault((lang, lib), []).append(res)
    return [{"lang": lang, "lib": lib, "workers": cfg.workers, "iters": cfg.iters, "permits": SEM_PERMITS,
             "runs": acc[(lang, lib)]} for lang, lib in plan if (lang, lib) in acc]


# --------------------------------------------------------------------------------------------
# Scenario 4: many holders


class Monitor:
    """Counts the commands clients send, as MONITOR shows them (commands run inside a Lua script
    are listed with the source `lua` and are not counted as calls)."""

    def __init__(self, port: int):
        import socket

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"MONITOR\r\n")
        self.buf = b""
        first = self._line()
        if first != b"+OK":
            raise RuntimeError(f"MONITOR answered {first!r}")
        self.sock.settimeout(None)
        self.calls: list[tuple[float, str]] = []  # (server time, command) of client calls
        self.lua = 0
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._run, daemon=True).start()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _run(self):
        try:
            while not self.stopped:
                line = self._line()
                if not line.startswith(b"+"):
                    continue
                sp = line.find(b" ")
                close = line.find(b"] ", sp)
                src = line[sp + 2:close]
                if src.endswith(b" lua"):
                    self.lua += 1
                    continue
                rest = line[close + 3:]
                cmd = rest[: rest.find(b'"')].decode(errors="replace").lower()
                with self.lock:
                    self.calls.append((float(line[1:sp]), cmd))
        except (EOFError, OSError, ValueError):
            pass

    def first_after(self, t: float) -> float | None:
        with self.lock:
            return next((ts for ts, _ in self.calls if ts > t), None)

    def calls_between(self, t0: float, t1: float) -> list[tuple[float, str]]:
        with self.lock:
            return [(ts, cmd) for ts, cmd in self.calls if t0 <= ts < t1]

    def close(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass


def peer_errors(err_lines: list[str]) -> str:
    """The distinct exceptions named in a worker's stderr (threads may interleave their tracebacks)."""
    found: dict[str, str] = {}
    for m in re.finditer(r"\b([A-Z]\w*(?:Error|Exception)|NotAcquired): ([^\n^]{0,100})", "".join(err_lines)):
        found.setdefault(m.group(1), m.group(2).strip())
    if not found:
        return ""
    return "; its stderr names " + "; ".join(f"{k}: {v}" if v else k for k, v in list(found.items())[:4])


KEY_PREFIX = {"crosslock": "", "python-redis-lock": "lock:", "redis-semaphore": "mutex:"}


def holders_one(cfg, runner, r, port, lang, lib, n, what) -> dict | None:
    watchdog_ms = cfg.watchdog_ms
    # The renewal period of each library for that lease.
    if lib == "crosslock":
        period = watchdog_ms / 3 / 1000
    elif lib == "python-redis-lock":
        period = max(1, round(watchdog_ms / 1000)) * 2 / 3
    elif lib == "redis-semaphore":
        period = round(watchdog_ms * 0.8) / 1000
    else:
        raise ValueError(lib)
    name = f"bench:m:{lang}:{lib}:{n}"
    # Node reads RSS once V8 has given back the young generation the burst grew (worker.js,
    # steadyRssKb), waiting at most node_steady_ms.
    steady = {"steady_ms": cfg.node_steady_ms} if lang == "node" else {}
    kid = Child(runner.cmd(lang, "holders", lib, name=name, n=n, watchdog_ms=watchdog_ms, **steady), what)
    mon = None
    try:
        (rss_connected,) = kid.expect("connected", 60)
        held_n, watched, rss_held, took = kid.expect("held", cfg.timeout)
        # Let the acquisitions settle, find the next renewal, then watch a few periods. Calls are
        # grouped into renewal rounds (bursts separated by quiet gaps); the first and last round
        # seen may be cut by the window and are dropped. A library whose timers are spread out
        # (one timer per lock) shows no rounds: then calls per period = calls/s x its period.
        # The first round after a fast burst of acquires sends every batch's script whole (EVAL:
        # the batches run concurrently, before the connection has seen the script once), so the
        # window starts a period later, with the steady state.
        mon = Monitor(port)
        settle = time.time() + period + min(period, 1.0)
        time.sleep(period + min(period, 1.0))
        deadline = time.monotonic() + 3 * period + 2
        t_burst = None
        while time.monotonic() < deadline:
            t_burst = mon.first_after(settle)
            if t_burst is not None:
                break
            time.sleep(0.01)
        if t_burst is None:
            raise RuntimeError(f"no renewal seen within {3 * period + 2:.1f}s")
        t0 = t_burst - period / 2
        t1 = t_burst + (cfg.holder_periods + 2) * period
        while time.time() < t1 + 0.5:
            time.sleep(0.05)
        calls = mon.calls_between(t0, t1)
        mon.close()
        # Rounds are found from the renewal calls only: a connection's keepalive PINGs (sent when it
        # is idle, between rounds) would otherwise split the quiet gaps into rounds of their own.
        rounds = []
        for ts, cmd in calls:
            if cmd == "ping":
                continue
            if rounds and ts - rounds[-1][-1][0] < 0.3 * period:
                rounds[-1].append((ts, cmd))
            else:
                rounds.append([(ts, cmd)])
        complete = rounds[1:-1]
        bursty = len(complete) >= 1 and all(r[-1][0] - r[0][0] < 0.5 * period for r in complete)
        by_command: dict[str, int] = {}
        if bursty:
            for rnd in complete:
                for _, cmd in rnd:
                    by_command[cmd] = by_command.get(cmd, 0) + 1
            n_periods = len(complete)
            starts = [r[0][0] for r in rounds]
            actual_period = (starts[-1] - starts[0]) / (len(starts) - 1) if len(starts) > 1 else period
            window = n_periods * actual_period
            # The PINGs of the same stretch of time, one period per complete round.
            t_a = complete[0][0][0]
            for ts, cmd in calls:
                if cmd == "ping" and t_a <= ts < t_a + window:
                    by_command[cmd] = by_command.get(cmd, 0) + 1
        else:
            for _, cmd in calls:
                by_command[cmd] = by_command.get(cmd, 0) + 1
            window = t1 - t0
            n_periods = window / period
            actual_period = period
        kid.send("report")
        # Node adds how long it waited for V8's young generation and whether it came back.
        watched_after, rss_after, *steady_read = kid.expect("report", 30 + cfg.node_steady_ms / 1000)
        total = sum(by_command.values())
        if int(watched_after) != n and lib == "crosslock":
            raise RuntimeError(f"the watchdog renews {watched_after} locks, expected {n}")
        sample = [f"{KEY_PREFIX[lib]}{name}:{i}" for i in range(0, n, max(1, n // 50))]
        alive = r.exists(*sample)
        lost = None
        if alive != len(sample):
            lost = (f"only {alive} of {len(sample)} sampled locks still existed after "
                    f"{t1 - t_burst:.1f}s with a {watchdog_ms} ms lease: renewal failed"
                    + peer_errors(kid.err))
            if lib == "crosslock":
                raise RuntimeError(lost)
            log(f"{what}: {lost} (a finding about the peer, not a harness failure)")
        by_command = {k: v / n_periods for k, v in by_command.items()}
        return {
            "lang": lang, "lib": lib, "n": n, "watchdog_ms": watchdog_ms, "period_s": period,
            "actual_period_s": actual_period, "rounds": n_periods if bursty else None, "window_s": window,
            "calls_per_period": total / n_periods, "calls_per_s": total / n_periods / actual_period,
            "by_command": by_command, "acquire_s": float(took), "watched": int(watched_after),
            "rss_connected_kb": int(rss_connected), "rss_held_kb": int(rss_held), "rss_after_kb": int(rss_after),
            "renewal_failed": lost,
            "rss_wait_s": int(steady_read[0]) / 1000 if steady_read else None,
            "young_back": steady_read[1] == "1" if steady_read else None,
        }
    except Exception as e:  # noqa: BLE001
        if lib == "crosslock":
            fail(f"{what}: {e}")
            return None
        # A peer that falls over while holding many locks is a finding about the peer.
        time.sleep(0.2)
        exited = kid.proc.poll()
        msg = f"{e}" + (f"; the process exited with status {exited}" if exited is not None else "") + peer_errors(kid.err)
        log(f"{what}: {msg} (a finding about the peer, not a harness failure)")
        return {"lang": lang, "lib": lib, "n": n, "watchdog_ms": watchdog_ms, "period_s": period, "crashed": msg}
    finally:
        if mon:
            mon.close()
        kid.finish(timeout=30)


def holders(cfg, runner: Runner, r: redis.Redis, port: int) -> list[dict]:
    out = []
    plan = [(lang, "crosslock") for lang in ("rust", "python", "node")]
    plan += [("python", "python-redis-lock"), ("node", "redis-semaphore")]
    for lang, lib in plan:
        if not cfg.want(lang, lib):
            continue
        for n in cfg.holder_counts:
            if lib == "python-redis-lock" and n > cfg.prl_max_holders:
                continue  # one renewal thread per lock
            what = f"holders {lang}/{lib} n={n}"
            r.flushall()
            res = holders_one(cfg, runner, r, port, lang, lib, n, what)
            if res and res.get("crashed"):
                out.append(res)
            elif res:
                log(f"{what}: {res['calls_per_period']:.1f} calls/period over {res['rounds'] or 'no'} rounds "
                    f"({res['by_command']}, period {res['actual_period_s']:.2f}s), RSS {res['rss_after_kb'] / 1024:.1f} MB")
                out.append(res)
    return out


# --------------------------------------------------------------------------------------------
# Breakdown: per-call latency of single operations in each stack


def breakdown(cfg, runner: Runner) -> list[dict]:
    out = []
    for lang in ("rust", "python", "node"):
        if not cfg.want(lang, "crosslock"):
            continue
        what = f"breakdown {lang}"
        res = run_json(runner.cmd(lang, "rtt", "crosslock", name=f"bench:b:{lang}", calls=cfg.rtt_calls,
                                  repeats=cfg.rtt_repeats), cfg.timeout, what)
        if res:
            log(f"{what}: " + ", ".join(f"{o['op']} {statistics.median(o['p50_us']):.0f}" for o in res["ops"]) + " (p50 us)")
            out.append({"lang": lang, **res})
    return out


# --------------------------------------------------------------------------------------------
# Machine and versions


def sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


def meta(r: redis.Redis) -> dict:
    from importlib import metadata

    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
    os_name = "?"
    if os.path.exists("/etc/os-release"):
        m = re.search(r'PRETTY_NAME="([^"]*)"', Path("/etc/os-release").read_text())
        os_name = m.group(1) if m else "?"

    def npm_version(pkg):
        try:
            return json.loads((BENCH / "node_modules" / pkg / "package.json").read_text())["version"]
        except OSError:
            return "?"

    try:
        import crosslock

        py_crosslock = getattr(crosslock, "__version__", None) or "?"
    except ImportError:
        py_crosslock = "not importable"

    def read(path):
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    # How an idle CPU sleeps: with the haltpoll driver and guest_halt_poll_ns 0, a VM's idle
    # virtual CPU halts at once, and every wake-up from it is a trip through the hypervisor.
    idle = {"driver": read("/sys/devices/system/cpu/cpuidle/current_driver"),
            "guest_halt_poll_ns": read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")}
    src = os.environ.get("CROSSLOCK_BENCH_SOURCE", str(ROOT))  # another checkout, when measuring one
    commit = sh(["git", "-C", src, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"])
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_start": os.getloadavg(),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
        "os": os_name,
        "kernel": platform.release(),
        "cpuidle": idle,
        "crosslock_commit": commit + (" (with uncommitted changes)" if dirty else ""),
        **({"source": src} if src != str(ROOT) else {}),
        "versions": {
            "redis-server": r.info("server")["redis_version"],
            "redis-benchmark": sh(["redis-benchmark", "--version"]).replace("redis-benchmark ", ""),
            "python": platform.python_version(),
            "crosslock (Python)": py_crosslock,
            "redis (redis-py)": metadata.version("redis"),
            "python-redis-lock": metadata.version("python-redis-lock"),
            "pottery": metadata.version("pottery"),
            "node": sh(["node", "--version"]),
            "bun": sh([*JS_RUNTIMES["bun"], "--version"]),
            "deno": (re.findall(r"\d+\.\d+\.\d+", sh([*JS_RUNTIMES["deno"][:1], "--version"])) or ["?"])[0],
            "ioredis": npm_version("ioredis"),
            "redlock": npm_version("redlock"),
            "redis-semaphore": npm_version("redis-semaphore"),
            "rustc": sh(["rustc", "--version"]),
        },
    }


# --------------------------------------------------------------------------------------------


class Config:
    def __init__(self, smoke: bool, only: set[str] | None, libs: set[str] | None):
        self.smoke = smoke
        self.only = only
        self.libs = libs
        if smoke:
            self.seconds, self.repeats, self.pinned_repeats = 0.2, 2, 1
            self.py_warmup_batch, self.node_warmup_batch = 20, 50
            self.handoff_rounds, self.handoff_rounds_slow = 5, 2
            self.workers, self.iters, self.contended_repeats = 8, 5, 1
            self.holder_counts, self.prl_max_holders = [100], 100
            self.watchdog_ms, self.holder_periods, self.node_steady_ms = 300, 2, 2000
            self.floor_probe, self.floor_seconds, self.floor_repeats = 500, 0.2, 1
            self.rtt_calls, self.rtt_repeats = 20, 1
            self.timeout = 60
        else:
            self.seconds, self.repeats, self.pinned_repeats = 1.0, 5, 3
            self.py_warmup_batch, self.node_warmup_batch = 200, 1000
            self.handoff_rounds, self.handoff_rounds_slow = 150, 20
            self.workers, self.iters, self.contended_repeats = 8, 200, 3
            self.holder_counts, self.prl_max_holders = [100, 1000, 10000], 1000
            self.watchdog_ms, self.holder_periods, self.node_steady_ms = 3000, 3, 10000
            self.floor_probe, self.floor_seconds, self.floor_repeats = 5000, 2.0, 3
            self.rtt_calls, self.rtt_repeats = 2000, 3
            self.timeout = 300

    def want_scenario(self, s):
        return self.only is None or s in self.only

    def want(self, lang, lib):
        return self.libs is None or lib in self.libs or f"{lang}/{lib}" in self.libs

    def want_mode(self, mode):
        return True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rust-bin", required=True)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--cluster-url", help="a redis+cluster:// URL for the cluster scenario (skipped without it)")
    p.add_argument("--only", help="comma-separated scenarios: floor,uncontended,uncontended_pinned,handoff,handoff_load,contended,holders,breakdown,semaphore,runtimes,cluster")
    p.add_argument("--libs", help="comma-separated libraries (or lang/lib) to run; default all")
    a = p.parse_args()
    cfg = Config(a.smoke, set(a.only.split(",")) if a.only else None, set(a.libs.split(",")) if a.libs else None)
    r = redis.Redis.from_url(a.url)
    port = r.connection_pool.connection_kwargs["port"]
    runner = Runner(a.url, a.rust_bin)
    started = time.monotonic()
    results = {"smoke": a.smoke, "meta": meta(r)}
    scenarios = [
        ("floor", lambda: floor(cfg, r, port)),
        ("uncontended", lambda: uncontended(cfg, runner, floor_at=(port, floor_command(r)))),
        ("uncontended_pinned", lambda: uncontended_pinned(cfg, runner, r, port)),
        ("handoff", lambda: handoff(cfg, runner)),
        ("handoff_load", lambda: handoff_load(cfg, runner)),
        ("contended", lambda: contended(cfg, runner, r)),
        ("holders", lambda: holders(cfg, runner, r, port)),
        ("breakdown", lambda: breakdown(cfg, runner)),
        ("semaphore", lambda: semaphore(cfg, runner, r)),
        ("runtimes", lambda: runtimes(cfg, runner)),
    ]
    if a.cluster_url:
        scenarios.append(("cluster", lambda: cluster(cfg, Runner(a.cluster_url, a.rust_bin))))
    try:
        for key, fn in scenarios:
            if not cfg.want_scenario(key):
                continue
            log(f"--- scenario: {key}")
            r.flushall()
            t = time.monotonic()
            results[key] = fn()
            log(f"--- {key} took {time.monotonic() - t:.0f}s")
    finally:
        kill_stragglers()
    results["failures"] = FAILURES
    results["meta"]["loadavg_end"] = os.getloadavg()
    results["seconds"] = time.monotonic() - started
    Path(a.out).write_text(json.dumps(results, indent=1))
    log(f"wrote {a.out} ({results['seconds']:.0f}s, {len(FAILURES)} failures)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
