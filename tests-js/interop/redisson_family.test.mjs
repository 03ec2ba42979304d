// Every other lock of the family against the real Redisson (4.7.0 in a JVM, see tests-java/):
// FairLock, SpinLock, FencedLock, NonReentrantLock and the ReadWriteLock's halves, both directions.
//
// For each exclusive kind: a Java holder blocks our waiter and Java's unlock wakes it (every lease
// involved is 30 s or more, so only the release can hand it over within the bound); our holder
// blocks a Java waiter until our release; each side's holder is in the hash as Redisson writes it;
// Java's forceUnlock aborts our held lock's signal. Then what only some kinds do: a fair queue mixing
// Java and our waiters, non-reentrancy refused on both sides, a Java writer and our readers. One
// redis-server and one JVM serve the whole file (each test uses its own names).
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { JavaDriver } from './java-driver.mjs'
import { startRedis } from '../helpers/redis-server.mjs'
import { RawRedis } from '../helpers/resp.mjs'
import { background, crosslock, channelOf, unique, waitUntil, within } from '../helpers/util.mjs'

const { connect, LockLostError, NonReentrantError } = crosslock

const WOKEN_WITHIN = 10000 // ms
const MAX_GAP_NS = 2_000_000_000n // release (one side) -> acquire returned (other side)
const rwChannel = (name) => `redisson_rwlock:{${name}}`
const queueOf = (name) => `redisson_lock_queue:{${name}}`

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
  env.java = await JavaDriver.start()
  await env.java.connect(env.server.url)
  env.javaHolder = await env.java.holder()
  env.client = await connect(env.server.url)
  env.fast = await connect(env.server.url, { watchdogTimeout: 600 }) // renewal every 200 ms
})
after(async () => {
  await env.client?.close()
  await env.fast?.close()
  await env.java?.close()
  await env.raw?.close()
  await env.server?.stop()
})

// ours, the Java driver's, how to make ours, the hash field's suffix, the channel a blocked waiter
// subscribes to (null: the spin lock never subscribes)
const KINDS = [
  ['fairLock', 'fair', (c, n) => c.fairLock(n), '', null],
  ['spinLock', 'spin', (c, n) => c.spinLock(n), '', null],
  ['fencedLock', 'fenced', (c, n) => c.fencedLock(n), '', channelOf],
  ['nonReentrantLock', 'nonReentrant', (c, n) => c.nonReentrantLock(n), '', channelOf],
  ['nonReentrantFairLock', 'nonReentrantFair', (c, n) => c.nonReentrantFairLock(n), '', null],
  ['writeLock', 'write', (c, n) => c.readWriteLock(n).writeLock(), ':write', rwChannel]
]

const FAIR = new Set(['fairLock', 'nonReentrantFairLock'])

/** Our waiter is verifiably waiting: subscribed, queued (fair), or no answer yet (spin). */
async function blocked (kind, name, waiter, waitsOn) {
  const { raw } = env
  if (FAIR.has(kind)) await waitUntil(async () => (await raw.command('LLEN', queueOf(name))) === 1, 'our waiter to queue')
  else if (waitsOn) await waitUntil(async () => (await raw.numsub(waitsOn(name))) > 0, 'our waiter to subscribe')
  else await sleep(300)
  assert.equal(waiter.done, false, 'our waiter returned while Java held the lock')
}

for (const [kind, javaKind, make, suffix, waitsOn] of KINDS) {
  describe(`${kind} and Redisson`, () => {
    test('a Java holder blocks our waiter, and its unlock wakes it', async () => {
      const { java, raw, client, javaHolder } = env
      const name = unique(`family-java-holds-${kind}`)
      assert.equal(await java.ok(`kind ${javaKind}`), javaKind)
      await java.ok(`lock ${name}`)
      assert.equal((await raw.hgetall(name))[`${javaHolder}${suffix}`], '1')
      const lock = make(client, name)
      assert.equal(await lock.tryAcquire(), null)
      const waiter = background(lock, { wait: 60000 })
      await blocked(kind, name, waiter, waitsOn)
      const released = await java.call(`unlock ${name}`)
      assert.ok(released.ok, released.line)
      await within(waiter.promise, WOKEN_WITHIN, 'our waiter to be woken by Java\'s unlock')
      assert.equal(waiter.error, null)
      assert.ok(waiter.acquiredNs - released.nanos < MAX_GAP_NS)
      assert.equal((await raw.hgetall(name))[`${client.id}:${waiter.held.owner}${suffix}`], '1')
      assert.equal(await java.ok(`tryLock ${name}`), 'false')
      await waiter.held.release()
      assert.equal(await raw.command('EXISTS', name), 0)
    })

    test('our holder blocks a Java waiter, and our release wakes it', async () => {
      const { java, raw, client, javaHolder } = env
      const name = unique(`family-we-hold-${kind}`)
      assert.equal(await java.ok(`kind ${javaKind}`), javaKind)
      const held = await make(client, name).acquire()
      assert.equal((await raw.hgetall(name))[`${client.id}:${held.owner}${suffix}`], '1')
      assert.equal(await java.ok(`tryLock ${name}`), 'false')
      java.send(`tryLockWait ${name} 20000 -1`)
      if (FAIR.has(kind)) await waitUntil(async () => (await raw.command('LLEN', queueOf(name))) === 1, 'Java to queue')
      else if (waitsOn) await waitUntil(async () => (await raw.numsub(waitsOn(name))) > 0, 'Java to subscribe')
      assert.equal(java.hasReply(), false, 'Java returned while we held the lock')
      await held.release()
      assert.equal(java.expectOk(await java.reply(WOKEN_WITHIN + 5000)), 'true')
      assert.equal((await raw.hgetall(name))[`${javaHolder}${suffix}`], '1')
      assert.equal(await make(client, name).tryAcquire(), null)
      await java.ok(`unlock ${name}`)
      assert.equal(await raw.command('EXISTS', name), 0)
    })

    test('Java\'s forceUnlock aborts our held lock\'s signal', async () => {
      const { java, raw, fast } = env
      const name = unique(`family-forced-${kind}`)
      const held = await make(fast, name).acquire()
      const aborted = new Promise((resolve) => held.signal.addEventListener('abort', () => resolve(held.signal.reason), { once: true }))
      assert.equal(await java.ok(`kind ${javaKind}`), javaKind)
      assert.equal(await java.ok(`forceUnlock ${name}`), 'true')
      const reason = await within(aborted, WOKEN_WITHIN, 'the lost signal after Java\'s forceUnlock')
      assert.ok(reason instanceof LockLostError, String(reason))
      assert.equal(held.lost, true)
      await assert.rejects(held.release(), LockLostError)
      assert.equal(await raw.command('EXISTS', name), 0)
    })
  })
}

for (const [kind, javaKind] of [['fairLock', 'fair'], ['nonReentrantFairLock', 'nonReentrantFair']]) {
  test(`${kind}: a fair queue of Java and our waiters is served in order`, async () => {
    const { java, raw, client, javaHolder } = env
    const name = unique(`family-fair-order-${kind}`)
    const holder = await client[kind](name).acquire({ lease: 60000 })
    const first = background(client[kind](name), { wait: 60000 })
    await waitUntil(async () => (await raw.command('LLEN', queueOf(name))) === 1, 'our first waiter to queue')
    assert.equal(await java.ok(`kind ${javaKind}`), javaKind)
    java.send(`tryLockWait ${name} 30000 -1`)
    await waitUntil(async () => (await raw.command('LLEN', queueOf(name))) === 2, 'Java to queue')
    const last = background(client[kind](name), { wait: 60000 })
    await waitUntil(async () => (await raw.command('LLEN', queueOf(name))) === 3, 'our last waiter to queue')
    assert.equal((await raw.command('LRANGE', queueOf(name), 0, -1))[1], javaHolder)

    await holder.release()
    await within(first.promise, WOKEN_WITHIN, 'our first waiter')
    assert.equal(first.error, null)
    assert.equal(java.hasReply(), false)
    assert.equal(last.done, false)
    await first.held.release()
    assert.equal(java.expectOk(await java.reply(WOKEN_WITHIN)), 'true') // Java is next, not our last
    await sleep(300)
    assert.equal(last.done, false)
    await java.ok(`unlock ${name}`)
    await within(last.promise, WOKEN_WITHIN, 'our last waiter')
    assert.equal(last.error, null)
    await last.held.release()
    assert.equal(await raw.command('EXISTS', name, queueOf(name), `redisson_lock_timeout:{${name}}`), 0)
  })
}

for (const [kind, javaKind] of [['nonReentrantLock', 'nonReentrant'], ['nonReentrantFairLock', 'nonReentrantFair']]) {
  test(`${kind} is refused to its own holder on both sides`, async () => {
    const { java, raw, client, javaHolder } = env
    const name = unique(`family-non-reentrant-${kind}`)
    assert.equal(await java.ok(`kind ${javaKind}`), javaKind)
    await java.ok(`lock ${name}`)
    const again = await java.call(`tryLock ${name}`)
    assert.equal(again.ok, false, again.line)
    assert.equal(again.error, 'IllegalMonitorStateException')
    assert.deepEqual(await raw.hgetall(name), { [javaHolder]: '1' })
    await java.ok(`unlock ${name}`)

    const lock = client[kind](name)
    await lock.withLock(async () => {
      await assert.rejects(lock.acquire({ wait: 1000 }), (e) => e instanceof NonReentrantError && e.lockName === name)
    })
    assert.equal(await raw.command('EXISTS', name, queueOf(name), `redisson_lock_timeout:{${name}}`), 0)
  })
}

test('a Java writer and our readers exclude each other', async () => {
  const { java, raw, client, javaHolder } = env
  const name = unique('family-rw')
  const rw = client.readWriteLock(name)
  assert.equal(await java.ok('kind write'), 'write')
  await java.ok(`lock ${name}`)
  const reader = background(rw.readLock(), { wait: 60000 })
  await blocked('readLock', name, reader, rwChannel)
  const writerOut = await java.call(`unlock ${name}`) // a write release wakes every reader
  await within(reader.promise, WOKEN_WITHIN, 'our reader')
  assert.equal(reader.error, null)
  assert.ok(reader.acquiredNs - writerOut.nanos < MAX_GAP_NS)
  assert.deepEqual(await raw.hgetall(name), { mode: 'read', [`${client.id}:${reader.held.owner}`]: '1' })

  java.send(`tryLockWait ${name} 20000 -1`) // Java's writer waits for our reader
  await waitUntil(async () => (await raw.numsub(rwChannel(name))) > 0, 'Java\'s writer to subscribe')
  assert.equal(java.hasReply(), false)
  await reader.held.release()
  assert.equal(java.expectOk(await java.reply(WOKEN_WITHIN)), 'true')
  assert.deepEqual(await raw.hgetall(name), { mode: 'write', [`${javaHolder}:write`]: '1' })
  await java.ok(`unlock ${name}`)
  assert.equal(await raw.command('EXISTS', name), 0)
})

// Every kind (the plain lock and the read lock too): ours, the Java driver's, the Java kind that
// must be refused while ours is held, how to make ours.
const EXTEND_KINDS = [
  ['lock', 'lock', 'lock', (c, n) => c.lock(n)],
  ...KINDS.map(([kind, javaKind, make]) => [kind, javaKind, javaKind, make]),
  ['readLock', 'read', 'write', (c, n) => c.readWriteLock(n).readLock()]
]

describe('extend, seen by Redisson', { concurrency: 1 }, () => {
  for (const [kind, javaKind, javaRival, make] of EXTEND_KINDS) {
    test(`${kind}: Redisson sees the lease our extend set, and cannot take it past the first lease`, async () => {
      const { java } = env
      const name = unique(`family-extended-${kind}`)
      const held = await make(env.client, name).acquire({ lease: 300 })
      await held.extend(5000)
      await java.ok(`kind ${javaKind}`)
      const ttl = Number(await java.ok(`ttl ${name}`))
      assert.ok(ttl > 3000 && ttl <= 5000, `Redisson's remainTimeToLive is ${ttl} ms`)
      await sleep(450) // past the first lease
      await java.ok(`kind ${javaRival}`)
      assert.equal(await java.ok(`tryLock ${name}`), 'false', 'Redisson took it after the first lease')
      await held.release()
      assert.equal(await java.ok(`tryLock ${name}`), 'true')
      await java.ok(`unlock ${name}`)
    })
  }
})
