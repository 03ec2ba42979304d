// Shared test plumbing: the built package, a redis-server per test file, polling with a deadline.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, before } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

import { startRedis } from './redis-server.mjs'
import { RawRedis } from './resp.mjs'

/** The built package at the repo root (`npm run build` first). */
export const crosslock = createRequire(import.meta.url)('../../')

/**
 * What goes before a script's path to run it on this runtime (`process.execPath`): nothing for
 * Node and Bun, `run -A` for Deno (which otherwise asks for each permission).
 */
export const runScript = globalThis.Deno ? ['run', '-A'] : []

/** The package's native half (`laneWatcher()`: how this runtime's lanes are watched). */
export const native = createRequire(import.meta.url)('../../bindings-node/native.js')

/** The channel Redisson (and crosslock) publishes a lock's releases on. */
export const channelOf = (name) => `redisson_lock__channel:{${name}}`

let counter = 0
/** A lock name unique within the run. */
export const unique = (prefix = 'lock') => `${prefix}:${process.pid}:${++counter}`

/**
 * Polls `condition` (sync or async) until it is truthy, or throws after `ms` naming `what`.
 */
export async function waitUntil (condition, what, ms = 10_000, every = 20) {
  const deadline = Date.now() + ms
  while (true) {
    const value = await condition()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, every))
  }
}

/** `fn(raw)` on a fresh connection to the server at `port`, closed afterwards. */
export async function onNode (port, fn) {
  const raw = await RawRedis.connect(`redis://127.0.0.1:${port}/0`)
  try {
    return await fn(raw)
  } finally {
    await raw.close()
  }
}

/** One command on a fresh connection to the server at `port`; `null` if it fails. */
export async function ask (port, ...args) {
  let raw
  try {
    raw = await RawRedis.connect(`redis://127.0.0.1:${port}/0`)
    return await raw.command(...args)
  } catch {
    return null
  } finally {
    await raw?.close()
  }
}

/**
 * Whether a master's `INFO replication` lists `count` replicas online that acknowledged an
 * offset: after a full sync a master sends a replica nothing (nor counts it in WAIT) until the
 * replica's first acknowledgement, which comes within a second.
 */
export function replicasAcknowledged (info, count) {
  const acknowledged = info.split(/\r?\n/).filter((line) => {
    if (!line.startsWith('slave') || !line.includes('state=online')) return false
    const offset = line.split(',').find((f) => f.startsWith('offset='))
    return offset !== undefined && Number(offset.slice('offset='.length)) > 0
  })
  return acknowledged.length >= count
}

/**
 * Waits until the replica at port `replica` has applied the replication stream of the master at
 * `master` up to the master's offset now: every write it made, whoever made it. Not `WAIT 1` from
 * a fresh connection: WAIT counts the replicas that acknowledged the writes of its own
 * connection, so on one that wrote nothing it answers 1 at once, however far behind the replica is.
 */
export async function replicaCaughtUp (master, replica) {
  const offset = async (port, field) => {
    const info = String(await ask(port, 'INFO', 'replication') ?? '')
    const line = info.split(/\r?\n/).find((l) => l.startsWith(`${field}:`))
    return line === undefined ? null : Number(line.slice(field.length + 1))
  }
  const target = await offset(master, 'master_repl_offset')
  if (target === null) throw new Error(`no replication offset on the master at ${master}`)
  await waitUntil(async () => ((await offset(replica, 'slave_repl_offset')) ?? -1) >= target,
    `the replica at ${replica} to apply the master's ${target} bytes`, 5_000, 10)
}

/**
 * One redis-server for the calling test file, plus a raw connection and a default client:
 * `const env = useRedis()`, then `env.url`, `env.raw`, `env.client` inside tests. Clients made
 * with `env.connect()` are closed after the file.
 */
export function useRedis (clientOptions = {}) {
  const env = { url: '', raw: null, client: null, server: null, clients: [] }
  env.connect = async (options = clientOptions) => {
    const c = await crosslock.connect(env.url, options)
    env.clients.push(c)
    return c
  }
  before(async () => {
    env.server = await startRedis()
    env.url = env.server.url
    env.raw = await RawRedis.connect(env.url)
    env.client = await env.connect()
  })
  after(async () => {
    for (const c of env.clients) await c.close().catch(() => {})
    await env.raw?.close()
    await env.server?.stop()
  })
  return env
}

/** Resolves like `promise`, or rejects after `ms` naming `what` (the timer never outlives it). */
export async function within (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Starts `lock.acquire(options)` in the background: `state.done` once it settled, with `held` or
 * `error`, and `acquiredNs` (CLOCK_MONOTONIC, comparable with the Java driver's) when it returned.
 */
export function background (lock, options) {
  const state = { done: false, held: null, error: null, acquiredNs: 0n }
  state.promise = (async () => {
    try {
      state.held = await lock.acquire(options)
      state.acquiredNs = process.hrtime.bigint()
    } catch (err) {
      state.error = err
    } finally {
      state.done = true
    }
  })()
  return state
}

/**
 * The wake-up check every topology runs: for a lock, a fair lock, a write lock, a semaphore and a
 * count-down latch named `<prefix>:<kind>`, `a` holds (a lock with a lease far longer than the
 * test, so only a release's message lets the waiter in), `b` waits 20 s at most and must get in
 * once `a` releases. `whileWaiting(channel)` runs with `b`'s lock waiter started, given the
 * lock's shared channel (`null` for the fair lock, whose waiters each have their own); by default
 * it gives the waiter 200 ms to subscribe.
 */
export async function releaseWakesEveryKind (a, b, prefix, whileWaiting = () => delay(200)) {
  const kinds = [
    ['lock', (c) => c.lock(`${prefix}:lock`), `redisson_lock__channel:{${prefix}:lock}`],
    ['fair', (c) => c.fairLock(`${prefix}:fair`), null],
    ['rw', (c) => c.readWriteLock(`${prefix}:rw`).writeLock(), `redisson_rwlock:{${prefix}:rw}`]
  ]
  for (const [, make, channel] of kinds) {
    const held = await make(a).acquire({ lease: 120_000 })
    const waiter = make(b).acquire({ wait: 20_000 })
    await whileWaiting(channel)
    await held.release()
    await (await waiter).release()
  }
  const semName = `${prefix}:sem`
  await a.semaphore(semName).delete()
  assert.equal(await a.semaphore(semName).trySetPermits(0), true)
  const taker = b.semaphore(semName).tryAcquire({ wait: 20_000 })
  await delay(200)
  await a.semaphore(semName).release()
  assert.equal(await taker, true)

  const latchName = `${prefix}:latch`
  await a.countDownLatch(latchName).delete()
  assert.equal(await a.countDownLatch(latchName).trySetCount(1), true)
  const opened = b.countDownLatch(latchName).wait({ wait: 20_000 })
  await delay(200)
  await a.countDownLatch(latchName).countDown()
  await opened
}

/**
 * Eight workers spread over `clients` each take lock `name` 25 times and bump a counter inside,
 * yielding between read and write: no two are ever inside at once and the count is exactly 200.
 */
export async function eightWorkersExcludeEachOther (clients, name) {
  let counter = 0
  let inside = false
  await Promise.all(Array.from({ length: 8 }, async (_, w) => {
    const lock = clients[w % clients.length].lock(name)
    for (let i = 0; i < 25; i++) {
      const held = await lock.acquire()
      assert.equal(inside, false, 'two holders at once')
      inside = true
      const seen = counter
      await delay(0)
      counter = seen + 1
      inside = false
      await held.release()
    }
  }))
  assert.equal(counter, 200)
}

/** A full garbage collection (V8's `gc()`, exposed; Bun's own), for tests that check what it frees. */
export function exposedGc () {
  // Bun's JavaScriptCore takes no V8 flags; its own call collects at once.
  if (globalThis.Bun) return () => globalThis.Bun.gc(true)
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc')
}
