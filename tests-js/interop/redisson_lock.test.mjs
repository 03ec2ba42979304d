// crosslock's Lock against the real Redisson RLock (Redisson 4.7.0 in a JVM, see tests-java/).
//
// Every test runs against its own throwaway redis-server and its own JVM. "Promptly" is asserted the
// way DESIGN.md asks: the holder's lease is long (60 s, or the 30 s watchdog), the waiter is verifiably
// blocked (subscribed to redisson_lock__channel:{name}, no answer yet), and it gets the lock within
// 10 s of the release, far before any lease could have run out. Java and Node timestamps are both
// CLOCK_MONOTONIC, so the gap between "released" and "acquired" is also checked (< 2 s, generous).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { JavaDriver, ensureBuilt } from './java-driver.mjs'
import { startRedis } from '../helpers/redis-server.mjs'
import { RawRedis } from '../helpers/resp.mjs'
import { background, crosslock, channelOf as channel, waitUntil } from '../helpers/util.mjs'

const { connect } = crosslock

const WOKEN_WITHIN = 10000 // ms; every lease involved is >= 30 s
const MAX_GAP_NS = 2_000_000_000n // release (one side) -> acquire returned (other side)
const now = () => process.hrtime.bigint()

/**
 * A fresh redis-server, a raw connection, a Redisson client (JVM) and a crosslock client, all torn
 * down after the test (JVM killed if it does not quit).
 */
async function setup (t, { watchdogTimeout } = {}) {
  const redis = await startRedis()
  const cleanups = [() => redis.stop()]
  t.after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })
  const raw = await RawRedis.connect(redis.url)
  cleanups.push(() => raw.close())
  const java = await JavaDriver.start()
  cleanups.push(() => java.close())
  await java.connect(redis.url)
  const client = await connect(redis.url, watchdogTimeout == null ? {} : { watchdogTimeout })
  cleanups.push(() => client.close())
  return { url: redis.url, raw, java, client }
}

async function subscribed (raw, name, who) {
  await waitUntil(async () => (await raw.numsub(channel(name))) > 0, `${who} to subscribe to ${channel(name)}`)
}

async function unsubscribed (raw, name, who) {
  await waitUntil(async () => (await raw.numsub(channel(name))) === 0, `${who} to unsubscribe from ${channel(name)}`)
}

/**
 * A plain connection subscribed to the lock's channel; `assertNoMessage()` proves nothing was
 * published since: replies come in order, so PING answers first only if no message came before.
 */
async function subscriber (url, name) {
  const messages = []
  const sub = await RawRedis.connect(url, (ch, payload) => messages.push(payload))
  assert.deepEqual(await sub.command('SUBSCRIBE', channel(name)), ['subscribe', channel(name), 1])
  sub.assertNoMessage = async () => {
    assert.deepEqual(await sub.command('PING'), ['pong', ''])
    assert.deepEqual(messages, [], `something was published on ${channel(name)}`)
  }
  return sub
}


async function within (promise, ms, what) {
  let timer
  try {
    return await Promise.race([
      promise,
      new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms) })
    ])
  } finally {
    clearTimeout(timer)
  }
}

test('interop: the Java driver builds (needs java and mvn: fails, never skips)', async () => {
  await ensureBuilt()
})

// --- Java holds, Node waits ----------------------------------------------------------------------

for (const [label, javaHold] of [['watchdog', 'lock'], ['lease 60 s', 'lockLease {name} 60000']]) {
  test(`interop: Java holds (${label}) -> a Node waiter is woken by Java's unlock`, async (t) => {
    const { raw, java, client } = await setup(t)
    const name = `interop:java-holds:${javaHold.split(' ')[0]}`
    await java.ok(javaHold.includes('{name}') ? javaHold.replace('{name}', name) : `${javaHold} ${name}`)
    const javaHolder = await java.holder()
    assert.deepEqual(await raw.hgetall(name), { [javaHolder]: '1' })
    assert.ok((await raw.command('PTTL', name)) > 20000)

    const lock = client.lock(name)
    assert.equal(await lock.isLocked(), true)
    assert.equal(await lock.isHeld(), false)
    assert.equal(await lock.tryAcquire(), null)
    assert.equal(await lock.tryAcquire({ wait: 50 }), null)
    await assert.rejects(lock.acquire({ wait: 50 }), (err) => err instanceof crosslock.LockTimeoutError && err.code === 'TIMEOUT')
    await unsubscribed(raw, name, 'our client (a timed-out wait leaves no subscription)')

    const waiter = background(lock, { wait: 60000 })
    await subscribed(raw, name, 'the Node waiter')
    assert.equal(waiter.done, false, 'the Node waiter got a lock Java holds')

    const beforeUnlock = now()
    const unlocked = await java.call(`unlock ${name}`)
    java.expectOk(unlocked)
    await within(waiter.promise, WOKEN_WITHIN, 'the Node waiter woken by Java\'s unlock')
    if (waiter.error) throw waiter.error
    assert.ok(waiter.held, 'the waiter did not get the lock')
    assert.ok(waiter.acquiredNs >= beforeUnlock, 'the waiter returned before Java unlocked')
    assert.ok(waiter.acquiredNs - unlocked.nanos < MAX_GAP_NS,
      `woken ${Number(waiter.acquiredNs - unlocked.nanos) / 1e9} s after Java's unlock`)

    assert.deepEqual(await raw.hgetall(name), { [`${client.id}:${waiter.held.owner}`]: '1' })
    assert.equal(await java.ok(`isLocked ${name}`), 'true')
    assert.equal(await java.ok(`isHeld ${name}`), 'false')
    assert.equal(await java.ok(`tryLock ${name}`), 'false')
    await waiter.held.release()
    assert.equal(await raw.command('EXISTS', name), 0)
    assert.equal(await java.ok(`tryLock ${name}`), 'true')
    await java.ok(`unlock ${name}`)
  })
}

// --- Node holds, Java waits ----------------------------------------------------------------------

for (const [label, ourLease, javaCmd, javaResult, javaTtlMax] of [
  ['Node lease 60 s / Java lock()', 60000, 'lock {name}', null, 30000],
  ['Node watchdog / Java tryLock(60 s, lease 60 s)', undefined, 'tryLockWait {name} 60000 60000', 'true', 60000],
  ['Node lease 60 s / Java tryLock(60 s, watchdog)', 60000, 'tryLockWait {name} 60000 -1', 'true', 30000]
]) {
  test(`interop: ${label} -> Java is woken by our release`, async (t) => {
    const { raw, java, client } = await setup(t)
    const name = 'interop:node-holds'
    const lock = client.lock(name)
    const held = await lock.acquire(ourLease === undefined ? {} : { lease: ourLease })
    assert.deepEqual(await raw.hgetall(name), { [`${client.id}:${held.owner}`]: '1' })
    assert.ok((await raw.command('PTTL', name)) > 20000)

    assert.equal(await java.ok(`isLocked ${name}`), 'true')
    assert.equal(await java.ok(`tryLock ${name}`), 'false')
    // (no timed tryLock here: Redisson may keep the channel subscribed after a wait limit passes
    // under load, and the check below needs the channel unsubscribed before Java starts waiting)
    assert.equal(await raw.numsub(channel(name)), 0)

    java.send(javaCmd.replace('{name}', name))
    await subscribed(raw, name, 'the Java waiter')
    assert.equal(java.hasReply(), false, 'Java got a lock Node holds')

    const beforeRelease = now()
    await held.release()
    const got = await java.reply(WOKEN_WITHIN)
    assert.equal(java.expectOk(got), javaResult)
    assert.ok(got.nanos >= beforeRelease, 'Java returned before Node released')
    assert.ok(got.nanos - beforeRelease < MAX_GAP_NS, `woken ${Number(got.nanos - beforeRelease) / 1e9} s after our release`)

    assert.deepEqual(await raw.hgetall(name), { [await java.holder()]: '1' })
    assert.equal(await java.ok(`isHeld ${name}`), 'true')
    const ttl = Number(await java.ok(`ttl ${name}`))
    assert.ok(ttl > 0 && ttl <= javaTtlMax, `ttl ${ttl}`)
    assert.equal(await lock.isLocked(), true)
    assert.equal(await lock.isHeld(), false)
    await java.ok(`unlock ${name}`)
    assert.equal(await lock.isLocked(), false)
  })
}

// --- Reentrancy on either side -------------------------------------------------------------------

test('interop: Java re-entry (hold count 2, partial unlock) is respected by Node', async (t) => {
  const { raw, java, client } = await setup(t)
  const name = 'interop:java-reenters'
  await java.ok(`lockLease ${name} 60000`)
  await java.ok(`lockLease ${name} 60000`)
  const javaHolder = await java.holder()
  assert.equal(await java.ok(`holdCount ${name}`), '2')
  assert.deepEqual(await raw.hgetall(name), { [javaHolder]: '2' })

  const lock = client.lock(name)
  assert.equal(await lock.isLocked(), true)
  assert.equal(await lock.holdCount(), 0)
  assert.equal(await lock.tryAcquire(), null)

  await java.ok(`unlock ${name}`) // partial: 2 -> 1
  assert.equal(await raw.command('HGET', name, javaHolder), '1')
  assert.equal(await lock.isLocked(), true)
  assert.equal(await lock.tryAcquire(), null)
  assert.equal(await java.ok(`holdCount ${name}`), '1')

  await java.ok(`unlock ${name}`)
  assert.equal(await raw.command('EXISTS', name), 0)
  const held = await lock.tryAcquire()
  assert.ok(held, 'Node could not take the lock Java fully released')
  await held.release()
})

test('interop: Node re-entry (hold count 2, partial release) is respected by Java', async (t) => {
  const { raw, java, client } = await setup(t)
  const name = 'interop:node-reenters'
  const lock = client.lock(name)
  const outer = await lock.acquire()
  const inner = await lock.acquire({ owner: outer.owner }) // re-entry by the same owner
  assert.equal(inner.owner, outer.owner)
  const ours = `${client.id}:${outer.owner}`
  assert.deepEqual(await raw.hgetall(name), { [ours]: '2' })

  assert.equal(await java.ok(`holdCount ${name}`), '0') // not Java's hold
  assert.equal(await java.ok(`isLocked ${name}`), 'true')
  assert.equal(await java.ok(`isHeld ${name}`), 'false')
  assert.equal(await java.ok(`tryLock ${name}`), 'false')

  await inner.release() // partial: 2 -> 1
  assert.deepEqual(await raw.hgetall(name), { [ours]: '1' })
  assert.equal(await java.ok(`isLocked ${name}`), 'true')
  assert.equal(await java.ok(`tryLock ${name}`), 'false')

  await outer.release()
  assert.equal(await raw.command('EXISTS', name), 0)
  assert.equal(await java.ok(`tryLock ${name}`), 'true')
  assert.equal(await java.ok(`holdCount ${name}`), '1')
  await java.ok(`unlock ${name}`)
})

test('interop: Node re-entry inside withLock (an owner scope) is respected by Java', async (t) => {
  const { raw, java, client } = await setup(t)
  const name = 'interop:node-reenters:withLock'
  const lock = client.lock(name)
  await lock.withLock(async (outer) => {
    const ours = `${client.id}:${outer.owner}`
    const inner = await lock.acquire({ wait: 0 }) // nested in the scope: re-enters, never waits
    assert.equal(inner.owner, outer.owner)
    assert.equal(await lock.holdCount(), 2)
    assert.deepEqual(await raw.hgetall(name), { [ours]: '2' })
    assert.equal(await java.ok(`holdCount ${name}`), '0')
    assert.equal(await java.ok(`isLocked ${name}`), 'true')
    assert.equal(await java.ok(`tryLock ${name}`), 'false')
    await inner.release()
    assert.deepEqual(await raw.hgetall(name), { [ours]: '1' })
    assert.equal(await java.ok(`tryLock ${name}`), 'false')
  })
  assert.equal(await raw.command('EXISTS', name), 0)
  assert.equal(await java.ok(`tryLock ${name}`), 'true')
  await java.ok(`unlock ${name}`)
})

// --- forceUnlock, foreign unlock and release -----------------------------------------------------

test('interop: Java forceUnlock -> our holder\'s signal aborts with LockLostError and our waiter gets the lock', async (t) => {
  // a short watchdog so that renewal (every 200 ms) notices the loss quickly
  const { raw, java, client } = await setup(t, { watchdogTimeout: 600 })
  const name = 'interop:force-unlocked'
  const lock = client.lock(name)
  const held = await lock.acquire()
  assert.deepEqual(await raw.hgetall(name), { [`${client.id}:${held.owner}`]: '1' })
  const aborted = new Promise((resolve) => held.signal.addEventListener('abort', () => resolve(held.signal.reason), { once: true }))

  const waiter = background(lock, { wait: 60000 }) // another async task: another owner
  await subscribed(raw, name, 'our waiter')
  assert.equal(waiter.done, false)

  assert.equal(await java.ok(`forceUnlock ${name}`), 'true')
  const reason = await within(aborted, WOKEN_WITHIN, 'the lost-lock signal after Java\'s forceUnlock')
  assert.equal(held.signal.aborted, true)
  assert.equal(held.lost, true)
  assert.equal(reason.code, 'LOCK_LOST')
  assert.equal(reason.lockName, name)

  await within(waiter.promise, WOKEN_WITHIN, 'our waiter getting the force-unlocked lock')
  if (waiter.error) throw waiter.error
  assert.ok(waiter.held)
  assert.notEqual(waiter.held.owner, held.owner)
  assert.deepEqual(await raw.hgetall(name), { [`${client.id}:${waiter.held.owner}`]: '1' })

  await assert.rejects(held.release(), (err) => err.code === 'LOCK_LOST' && err.lockName === name && err.message.includes(name))

  // the waiter's own hold is not lost and stays renewed past several watchdog periods
  await sleep(1500)
  assert.equal(waiter.held.signal.aborted, false)
  assert.deepEqual(await raw.hgetall(name), { [`${client.id}:${waiter.held.owner}`]: '1' })
  await waiter.held.release()
  assert.equal(await raw.command('EXISTS', name), 0)
})

for (const [label, ourLease] of [['lease 60 s', 60000], ['watchdog', undefined]]) {
  test(`interop: Java unlock of our lock (${label}) fails with IllegalMonitorStateException and changes nothing`, async (t) => {
    const { url, raw, java, client } = await setup(t)
    const name = 'interop:node-holds-java-unlocks'
    const lock = client.lock(name)
    const held = await lock.acquire(ourLease === undefined ? {} : { lease: ourLease })
    const before = await raw.hgetall(name)
    const pttlBefore = await raw.command('PTTL', name)
    const sub = await subscriber(url, name)
    try {
      const got = await java.call(`unlock ${name}`)
      assert.equal(got.ok, false)
      assert.equal(got.error, 'IllegalMonitorStateException')
      assert.ok(got.message.includes(`node id: ${java.clientId}`), got.message)
      const pttlAfter = await raw.command('PTTL', name)
      assert.deepEqual(await raw.hgetall(name), before)
      assert.ok(pttlAfter > pttlBefore - 5000 && pttlAfter <= pttlBefore + (ourLease ? 0 : 30000), `${pttlBefore} -> ${pttlAfter}`)
      await sub.assertNoMessage()
    } finally {
      await sub.close()
    }
    assert.equal(await java.ok(`isHeld ${name}`), 'false')
    assert.equal(await lock.isHeld({ owner: held.owner }), true)
    await held.release()
    assert.equal(await raw.command('EXISTS', name), 0)
  })
}

for (const [label, javaHold] of [['lease 60 s', 'lockLease {name} 60000'], ['watchdog', 'lock {name}']]) {
  test(`interop: our release of Java's lock (${label}) fails with NotHeldError and changes nothing`, async (t) => {
    const { url, raw, java, client } = await setup(t)
    const name = 'interop:java-holds-node-releases'
    await java.ok(javaHold.replace('{name}', name))
    const before = await raw.hgetall(name)
    assert.deepEqual(before, { [await java.holder()]: '1' })
    const pttlBefore = await raw.command('PTTL', name)
    const lock = client.lock(name)
    const sub = await subscriber(url, name)
    try {
      await assert.rejects(lock.release(), (err) => {
        assert.ok(err instanceof crosslock.NotHeldError, `${err.name}: ${err.message}`)
        assert.ok(err instanceof crosslock.CrosslockError)
        assert.equal(err.code, 'NOT_HELD')
        assert.equal(err.lockName, name)
        assert.ok(err.message.includes(name), err.message)
        return true
      })
      const pttlAfter = await raw.command('PTTL', name)
      assert.deepEqual(await raw.hgetall(name), before)
      assert.ok(pttlAfter > pttlBefore - 5000 && pttlAfter <= pttlBefore + (javaHold.startsWith('lockLease') ? 0 : 30000), `${pttlBefore} -> ${pttlAfter}`)
      await sub.assertNoMessage()
    } finally {
      await sub.close()
    }
    assert.equal(await java.ok(`isHeld ${name}`), 'true')
    assert.equal(await java.ok(`holdCount ${name}`), '1')
    await java.ok(`unlock ${name}`)
    assert.equal(await raw.command('EXISTS', name), 0)
  })
}
