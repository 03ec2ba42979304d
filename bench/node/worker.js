'use strict';
// The Node side of crosslock's benchmarks: one process, one library, one scenario.
//
// bench/harness.py runs it. In-process scenarios print one JSON object; multi-process scenarios
// speak the same line protocol as bench/py/worker.py (see bench/README.md).
//
//   node worker.js uncontended LIB URL --name N --seconds S --repeats R --warmup-batch B
//   node worker.js contended   LIB URL --name N --workers W --iters K     (async tasks)
//   node worker.js proc        LIB URL --name N --iters K [--permits P]   (one of W processes; P: a semaphore)
//   node worker.js handoff     LIB URL --name N
//   node worker.js holders     LIB URL --name N --n COUNT --watchdog-ms MS
//   node worker.js rtt         crosslock URL --name N --calls C --repeats R   (per-call breakdown)
//
// LIB: crosslock, crosslock+metrics (its OpenTelemetry metrics on), crosslock+spans (its spans on), redlock (v4, with ioredis), redis-semaphore (Mutex, with ioredis). Each runs with
// its own defaults for waiting; see LIBS below for the two settings we change and why.

const path = require('node:path');
const fs = require('node:fs');
const v8 = require('node:v8');
const readline = require('node:readline');
const { setTimeout: sleep } = require('node:timers/promises');

// CROSSLOCK_NODE_PACKAGE points at another build of the package (for profiling); default: the repo.
const ROOT = process.env.CROSSLOCK_NODE_PACKAGE || path.resolve(__dirname, '..', '..');
const LEASE_MS = 10000; // redlock has no default lease; redis-semaphore's default lockTimeout is 10 s

function loadIORedis() {
  const mod = require('ioredis');
  return mod.default || mod.Redis || mod;
}

// The handles the scenarios acquire and release through, one per lock: classes, so that a handle
// is one small object per lock (its methods are its class's). Closures made per lock cost ~0.2 KB
// each (their context and two functions), which the many-holders scenario counted as the
// library's memory.

/** A crosslock lock and the hold it last took. */
class CrosslockHandle {
  constructor(lock) { this.lock = lock; this.held = null; }
  async acquire() { this.held = await this.lock.acquire(); }
  async release() { const h = this.held; this.held = null; await h.release(); }
}

/** A semaphore-like object whose acquire() and release() take no hold object. */
class PlainHandle {
  constructor(inner) { this.inner = inner; }
  async acquire() { await this.inner.acquire(); }
  async release() { await this.inner.release(); }
}

/** A redlock lock by name, and the lock it last took. */
class RedlockHandle {
  constructor(redlock, name) { this.redlock = redlock; this.name = name; this.held = null; }
  async acquire() { this.held = await this.redlock.lock(this.name, LEASE_MS); }
  async release() { const h = this.held; this.held = null; await h.unlock(); }
}

/**
 * An SDK MeterProvider whose periodic reader exports to memory once a minute (nothing leaves the
 * process: what the crosslock+metrics rows measure is the recording), made once per process.
 */
let meterProvider;
function sdkMeterProvider() {
  if (meterProvider === undefined) {
    const { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } = require('@opentelemetry/sdk-metrics');
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
    meterProvider = new MeterProvider({ readers: [reader] });
  }
  return meterProvider;
}

/**
 * An SDK TracerProvider whose simple processor hands every ended span to an exporter that drops
 * it (what the crosslock+spans rows measure is making them), made once per process.
 */
let tracerProvider;
function sdkTracerProvider() {
  if (tracerProvider === undefined) {
    const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
    const dropped = { export(spans, done) { done({ code: 0 }); }, async shutdown() {} };
    tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(dropped)] });
  }
  return tracerProvider;
}

/**
 * crosslock's `kind` of lock (`lock`, `fairLock`) with the interface the scenarios use; with
 * `opts.metrics`, connected with its OpenTelemetry metrics on (`connect(url, { metrics })`); with
 * `opts.spans`, with its spans on (`connect(url, { spans })`).
 */
async function crosslockOf(kind, url, opts) {
  const { connect } = require(ROOT);
  const options = {};
  if (opts.watchdogMs) options.watchdogTimeout = opts.watchdogMs;
  if (opts.metrics) options.metrics = sdkMeterProvider();
  if (opts.spans) options.spans = sdkTracerProvider();
  const client = await connect(url, options);
  return {
    make(name) { return new CrosslockHandle(client[kind](name)); },
    watched: () => (typeof client.watchedLocks === 'function' ? client.watchedLocks() : -1),
    async close() { await client.close(); },
  };
}

const LIBS = {
  crosslock(url, opts = {}) { return crosslockOf('lock', url, opts); },

  // crosslock with its OpenTelemetry metrics on, recorded on an SDK MeterProvider.
  'crosslock+metrics'(url, opts = {}) { return crosslockOf('lock', url, { ...opts, metrics: true }); },

  // crosslock with its OpenTelemetry spans on, made on an SDK TracerProvider.
  'crosslock+spans'(url, opts = {}) { return crosslockOf('lock', url, { ...opts, spans: true }); },

  // crosslock's FairLock: waiters served in the order they asked, each woken on its own channel.
  'crosslock-fair'(url, opts = {}) { return crosslockOf('fairLock', url, opts); },

  // crosslock's Semaphore (Redisson's RSemaphore layout; the harness sets the permits).
  async 'crosslock-semaphore'(url) {
    const { connect } = require(ROOT);
    const client = await connect(url);
    return {
      make(name) { return new PlainHandle(client.semaphore(name)); },
      async close() { await client.close(); },
    };
  },

  // redis-semaphore's Semaphore. Defaults (lockTimeout 10 s, retryInterval 10 ms) except
  // acquireTimeout, as for its Mutex below.
  async 'redis-semaphore-semaphore'(url) {
    const Redis = loadIORedis();
    const { Semaphore } = require('redis-semaphore');
    const redis = new Redis(url);
    await redis.ping();
    return {
      make(name, { permits }) {
        return new PlainHandle(new Semaphore(redis, name, permits, { acquireTimeout: 600000 }));
      },
      async close() { redis.disconnect(); },
    };
  },

  async redlock(url) {
    const Redis = loadIORedis();
    const Redlock = require('redlock');
    const redis = new Redis(url);
    await redis.ping();
    // Defaults (retryDelay 200 ms, retryJitter 100 ms, driftFactor 0.01) except retryCount:
    // the default 10 makes a waiter give up after ~2 s, which would break the contended runs.
    const redlock = new Redlock([redis], { retryCount: -1 });
    redlock.on('clientError', () => {});
    return {
      make(name) { return new RedlockHandle(redlock, name); },
      async close() { redis.disconnect(); },
    };
  },

  async 'redis-semaphore'(url, opts = {}) {
    const Redis = loadIORedis();
    const { Mutex } = require('redis-semaphore');
    const redis = new Redis(url);
    await redis.ping();
    return {
      make(name, extra = {}) {
        // Defaults (lockTimeout 10 s, retryInterval 10 ms, refresh every 0.8 x lockTimeout)
        // except acquireTimeout: its default 10 s would fail a starved waiter in contended runs.
        return new PlainHandle(new Mutex(redis, name, { acquireTimeout: 600000, ...extra }));
      },
      async close() { redis.disconnect(); },
    };
  },
};

async function makeLib(name, url, opts) {
  const factory = LIBS[name];
  if (!factory) throw new Error(`unknown library ${name}; one of ${Object.keys(LIBS).join(', ')}`);
  return factory(url, opts);
}

// ---------------------------------------------------------------------------------------------

const now = () => process.hrtime.bigint();

function pctUs(sorted, q) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(Math.max(Math.ceil(q * sorted.length), 1), sorted.length);
  return sorted[rank - 1] / 1000;
}

// RSS after a full collection when the harness exposes it (node --expose-gc): what holding locks
// retains, not garbage the collector has yet to reach (the same for every library measured). V8
// gives the pages a collection emptied back to the system on a background thread, so RSS read
// right after gc() still counts them (up to ~9 MB more at 10,000 held locks, in some readings
// and not others): it is read once two readings 20 ms apart agree, at least 100 ms after it.
function rssNow() {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
}

async function rssKb() {
  if (!globalThis.gc) return rssNow();
  globalThis.gc();
  await sleep(100);
  let last = rssNow();
  for (let i = 0; i < 25; i++) {
    await sleep(20);
    const next = rssNow();
    if (next === last) break;
    last = next;
  }
  return last;
}

// The size of V8's young generation (new space), in bytes.
function youngBytes() {
  const space = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return space ? space.space_size : 0;
}

// RSS once the process holds its locks in a steady state: what holding them retains. A burst of
// acquires grows V8's young generation (2 MB to 16 MB at 10,000 locks) and V8 keeps it grown until
// its memory reducer runs, which takes a full collection that finds the process allocating
// little (gc() itself does not shrink it). Read before that, RSS counts young-generation pages no
// lock retains (~0.8 KB per lock at 10,000; the reading right after the burst, `held`, shows
// them). So this collects every 0.5 s, at most `capMs`, until the young generation is back to
// `youngBaseline` (its size when connected), then until RSS stops dropping (a collection can free
// what the one before left unreachable). The same for every Node library; one that keeps
// allocating (a timer per lock) may not get its young generation back within the cap, and is
// read as it is then. Returns [kB, waited ms, whether the young generation came back].
async function steadyRssKb(youngBaseline, capMs) {
  if (!globalThis.gc) return [rssNow(), 0, false];
  const t0 = Date.now();
  while (youngBytes() > youngBaseline && Date.now() - t0 < capMs) {
    globalThis.gc();
    await sleep(500);
  }
  const waited = Date.now() - t0;
  const back = youngBytes() <= youngBaseline;
  let last = await rssKb();
  for (let i = 0; i < 5; i++) {
    const next = await rssKb();
    if (next >= last - Math.max(64, last / 200)) return [Math.min(next, last), waited, back];
    last = next;
  }
  return [last, waited, back];
}

function say(line) {
  fs.writeSync(1, line + '\n');
}

function settled(rates) {
  const n = rates.length;
  return n >= 3 && Math.abs(rates[n - 1] - rates[n - 2]) <= 0.05 * rates[n - 2];
}

function summarizePairs(lat, elapsed) {
  const sorted = Float64Array.from(lat).sort();
  return {
    pairs: lat.length,
    seconds: elapsed,
    pairs_per_s: lat.length / elapsed,
    p50_us: pctUs(sorted, 0.5),
    p99_us: pctUs(sorted, 0.99),
  };
}

// Scenario 1 -----------------------------------------------------------------------------------

async function uncontended(lib, a) {
  const lock = lib.make(a.name);
  const rates = [];
  const warmStart = Date.now();
  for (;;) {
    const t0 = now();
    for (let i = 0; i < a.warmupBatch; i++) {
      await lock.acquire();
      await lock.release();
    }
    rates.push(a.warmupBatch / (Number(now() - t0) / 1e9));
    if (settled(rates) || rates.length >= 20 || Date.now() - warmStart > 10000) break;
  }
  const runs = [];
  const limit = BigInt(Math.round(a.seconds * 1e9));
  for (let r = 0; r < a.repeats; r++) {
    const lat = [];
    const start = now();
    for (;;) {
      const t0 = now();
      await lock.acquire();
      await lock.release();
      const t1 = now();
      lat.push(Number(t1 - t0));
      if (t1 - start >= limit) break;
    }
    runs.push(summarizePairs(lat, Number(now() - start) / 1e9));
  }
  return { runs, warmup: { batch: a.warmupBatch, rates } };
}

// Scenario 3: tasks ----------------------------------------------------------------------------

async function contended(lib, a) {
  const Redis = loadIORedis();
  const r = new Redis(a.url);
  const counter = `${a.name}:counter`;
  await r.set(counter, 0);
  const warm = lib.make(a.name);
  await warm.acquire();
  await warm.release();
  const errors = [];
  let go;
  const started = new Promise((resolve) => { go = resolve; });
  const work = async () => {
    const lock = lib.make(a.name);
    let maxWait = 0n;
    let done = 0;
    await started;
    try {
      for (let i = 0; i < a.iters; i++) {
        const t0 = now();
        await lock.acquire();
        const w = now() - t0;
        if (w > maxWait) maxWait = w;
        const v = Number((await r.get(counter)) || 0);
        await r.set(counter, v + 1);
        await lock.release();
        done++;
      }
    } catch (e) {
      errors.push(String(e && e.stack || e));
    }
    return [done, maxWait];
  };
  const tasks = [];
  for (let i = 0; i < a.workers; i++) tasks.push(work());
  const start = now();
  go();
  const results = await Promise.all(tasks);
  const elapsed = Number(now() - start) / 1e9;
  const done = results.reduce((s, [d]) => s + d, 0);
  const value = Number((await r.get(counter)) || 0);
  r.disconnect();
  let maxWait = 0n;
  for (const [, w] of results) if (w > maxWait) maxWait = w;
  return {
    ops: done,
    seconds: elapsed,
    ops_per_s: done / elapsed,
    counter: value,
    expected: a.workers * a.iters,
    max_wait_ms: Number(maxWait) / 1e6,
    errors,
  };
}

// Line protocols -------------------------------------------------------------------------------

function lines() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  return rl[Symbol.asyncIterator]();
}

// With --permits (a semaphore), the work inside counts the holders at once (INCR, DECR of
// NAME:holders) and reports the most it saw; otherwise it bumps a non-atomic counter.
async function proc(lib, a) {
  const Redis = loadIORedis();
  const r = new Redis(a.url);
  const counter = `${a.name}:counter`;
  const holders = `${a.name}:holders`;
  const lock = a.permits ? lib.make(a.name, { permits: a.permits }) : lib.make(a.name);
  let maxHolders = 0;
  await r.ping();
  say('ready');
  const input = lines();
  const first = await input.next();
  if (first.done || first.value.trim() !== 'go') return;
  let maxWait = 0n;
  let done = 0;
  const start = now();
  for (let i = 0; i < a.iters; i++) {
    const t0 = now();
    await lock.acquire();
    const w = now() - t0;
    if (w > maxWait) maxWait = w;
    if (a.permits) {
      maxHolders = Math.max(maxHolders, await r.incr(holders));
      await r.decr(holders);
    } else {
      const v = Number((await r.get(counter)) || 0);
      await r.set(counter, v + 1);
    }
    await lock.release();
    done++;
  }
  say(JSON.stringify({ done, max_wait_ms: Number(maxWait) / 1e6, max_holders: maxHolders, seconds: Number(now() - start) / 1e9 }));
  r.disconnect();
}

async function handoff(lib, a) {
  const lock = lib.make(a.name);
  say('ready');
  for await (const line of { [Symbol.asyncIterator]: lines }) {
    const parts = line.trim().split(/\s+/);
    if (parts[0] === 'acquire') {
      say('waiting');
      await lock.acquire();
      const t = now();
      say(`acquired ${t}`);
    } else if (parts[0] === 'release') {
      await new Promise((resolve) => setTimeout(resolve, Number(parts[1]) / 1000));
      const t = now();
      await lock.release();
      say(`released ${t}`);
    } else if (parts[0] === 'quit') {
      break;
    }
  }
  say('bye');
}

async function holders(libName, a) {
  const lib = await makeLib(libName, a.url, { watchdogMs: a.watchdogMs });
  say(`connected ${await rssKb()}`);
  const youngBaseline = youngBytes();
  const locks = [];
  for (let i = 0; i < a.n; i++) {
    // redis-semaphore refreshes every 0.8 x lockTimeout: give it the watchdog's lease.
    locks.push(libName === 'redis-semaphore' ? lib.make(`${a.name}:${i}`, { lockTimeout: a.watchdogMs }) : lib.make(`${a.name}:${i}`));
  }
  const t0 = now();
  for (let i = 0; i < locks.length; i += 256) {
    await Promise.all(locks.slice(i, i + 256).map((l) => l.acquire()));
  }
  const took = Number(now() - t0) / 1e9;
  const watched = () => (lib.watched ? lib.watched() : locks.length);
  say(`held ${a.n} ${watched()} ${await rssKb()} ${took.toFixed(3)}`);
  for await (const line of { [Symbol.asyncIterator]: lines }) {
    const cmd = line.trim();
    if (cmd === 'report') {
      const [kb, waited, back] = await steadyRssKb(youngBaseline, a.steadyMs);
      say(`report ${watched()} ${kb} ${waited} ${back ? 1 : 0}`);
    }
    else if (cmd === 'quit') break;
  }
  say('bye');
  process.exit(0);
}

// Breakdown: per-call latency of single operations ---------------------------------------------

const FLOOR_SCRIPT = "redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], ARGV[2]); return nil";

async function rtt(a) {
  const { connect } = require(ROOT);
  const Redis = loadIORedis();
  const client = await connect(a.url);
  const lock = client.lock(a.name);
  const r = new Redis(a.url);
  const sha = await r.script('LOAD', FLOOR_SCRIPT);
  const fk = `${a.name}:floor`;
  const results = {};
  for (let rep = 0; rep <= a.repeats; rep++) {
    const lat = {};
    const add = (k, v) => { (lat[k] = lat[k] || []).push(Number(v)); };
    for (let i = 0; i < a.calls; i++) {
      let t = now();
      await r.ping();
      add('ioredis PING', now() - t);
      t = now();
      await r.evalsha(sha, 1, fk, 'f', 30000);
      add('ioredis EVALSHA', now() - t);
      t = now();
      await lock.isLocked();
      add('crosslock isLocked()', now() - t);
      for (const [label, opts] of [['watchdog', undefined], ['lease', { lease: 10000 }]]) {
        t = now();
        const held = await lock.acquire(opts);
        const t1 = now();
        await held.release();
        add(`crosslock acquire() (${label})`, t1 - t);
        add(`crosslock release() (${label})`, now() - t1);
      }
    }
    if (rep > 0) for (const [k, v] of Object.entries(lat)) (results[k] = results[k] || []).push(v);
  }
  // CPU time and context switches per call, process-wide (the runtime threads too), each
  // operation in a block of its own.
  const { Mutex } = require('redis-semaphore');
  const mutex = new Mutex(r, `${a.name}:sem`, {});
  const blocks = [
    ['ioredis PING', () => r.ping()],
    ['ioredis EVALSHA', () => r.evalsha(sha, 1, fk, 'f', 30000)],
    ['crosslock isLocked()', () => lock.isLocked()],
    ['redis-semaphore Mutex pair', async () => { await mutex.acquire(); await mutex.release(); }],
    ['crosslock pair (watchdog)', async () => { const h = await lock.acquire(); await h.release(); }],
    ['crosslock pair (lease)', async () => { const h = await lock.acquire({ lease: 10000 }); await h.release(); }],
  ];
  const costs = [];
  for (const [op, fn] of blocks) {
    for (let i = 0; i < Math.max(10, a.calls / 10); i++) await fn();
    const u0 = process.resourceUsage();
    const t0 = now();
    for (let i = 0; i < a.calls; i++) await fn();
    const wall = Number(now() - t0);
    const u1 = process.resourceUsage();
    costs.push({
      op,
      wall_us: wall / 1000 / a.calls,
      cpu_us: (u1.userCPUTime + u1.systemCPUTime - u0.userCPUTime - u0.systemCPUTime) / a.calls,
      cs: (u1.voluntaryContextSwitches + u1.involuntaryContextSwitches
        - u0.voluntaryContextSwitches - u0.involuntaryContextSwitches) / a.calls,
    });
  }
  await client.close();
  r.disconnect();
  const ops = Object.entries(results).map(([op, reps]) => ({
    op,
    p50_us: reps.map((v) => pctUs(Float64Array.from(v).sort(), 0.5)),
    mean_us: reps.map((v) => v.reduce((s, x) => s + x, 0) / v.length / 1000),
  }));
  return { ops, costs };
}

// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
  const [scenario, lib, url, ...rest] = argv;
  const a = {
    scenario, lib, url, name: 'bench:node', seconds: 1, repeats: 5, warmupBatch: 1000,
    workers: 8, iters: 100, n: 100, watchdogMs: 3000, calls: 2000, permits: 0, steadyMs: 0,
  };
  for (let i = 0; i < rest.length; i += 2) {
    const key = rest[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    const v = rest[i + 1];
    a[key] = key === 'name' ? v : Number(v);
  }
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (a.scenario === 'holders') return holders(a.lib, a);
  if (a.scenario === 'rtt') { say(JSON.stringify(await rtt(a))); process.exit(0); }
  const lib = await makeLib(a.lib, a.url);
  let out;
  if (a.scenario === 'uncontended') out = await uncontended(lib, a);
  else if (a.scenario === 'contended') out = await contended(lib, a);
  else if (a.scenario === 'proc') await proc(lib, a);
  else if (a.scenario === 'handoff') await handoff(lib, a);
  else throw new Error(`unknown scenario ${a.scenario}`);
  if (out) say(JSON.stringify(out));
  await lib.close();
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`worker.js: ${e && e.stack || e}\n`);
  process.exit(1);
});
