// Semaphore, PermitExpirableSemaphore and CountDownLatch against the real Redisson (4.7.0 in a JVM,
// see tests-java/), both directions: the counts each side sees stay exact, a waiter on one side is
// woken by the other side's release or count-down (every wait is bounded far above a wake-up, and
// no lease runs out meanwhile), and a permit id travels between languages. One redis-server and one
// JVM serve the whole file (each test uses its own names).
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { JavaDriver } from './java-driver.mjs'
import { startRedis } from '../helpers/redis-server.mjs'
import { RawRedis } from '../helpers/resp.mjs'
import { crosslock, unique, waitUntil, within } from '../helpers/util.mjs'

const { connect, NotHeldError } = crosslock

const WITHIN = 10000 // ms a wake-up may take before the test fails
const semChannel = (name) => `redisson_sc:{${name}}`
const latchChannel = (name) => `redisson_countdownlatch__channel__{${name}}`

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
  env.java = await JavaDriver.start()
  await env.java.connect(env.server.url)
  env.client = await connect(env.server.url)
})
after(async () => {
  await env.client?.close()
  await env.java?.close()
  await env.raw?.close()
  await env.server?.stop()
})

/** Runs `fn` in the background; `state.done` once it settled. */
function background (fn) {
  const state = { done: false, value: undefined, error: null }
  state.promise = fn().then((v) => { state.value = v }, (e) => { state.error = e }).finally(() => { state.done = true })
  return state
}

test('semaphore permits are shared and a release wakes the other side', async () => {
  const { java, raw, client } = env
  const name = unique('sync-sem')
  const sem = client.semaphore(name)
  assert.equal(await java.ok(`semTrySet ${name} 5`), 'true')
  assert.equal(await sem.trySetPermits(9), false) // already set, by Java
  assert.equal(await sem.availablePermits(), 5)
  await sem.acquire({ permits: 3, wait: 1000 })
  assert.equal(await java.ok(`semAvailable ${name}`), '2')

  java.send(`semAcquire ${name} 3 20000`) // Java waits for 3; our release of 3 wakes it
  await waitUntil(async () => (await raw.numsub(semChannel(name))) > 0, 'Java to wait on the semaphore')
  assert.equal(java.hasReply(), false)
  await sem.release(3)
  assert.equal(java.expectOk(await java.reply(WITHIN)), 'true')
  assert.equal(await sem.availablePermits(), 2)

  const waiting = background(() => sem.acquire({ permits: 3, wait: 20000 })) // and the other way
  await waitUntil(async () => (await raw.numsub(semChannel(name))) > 0, 'our acquire to wait')
  await sleep(200)
  assert.equal(waiting.done, false)
  await java.ok(`semRelease ${name} 3`)
  await within(waiting.promise, WITHIN, 'our acquire to be woken by Java\'s release')
  assert.equal(waiting.error, null)
  assert.equal(await java.ok(`semAvailable ${name}`), '2')
  await sem.release(3)
  assert.equal(await raw.command('GET', name), '5')
})

test('releaseIfExists agrees with Redisson: an absent semaphore stays absent, and a release into an existing one wakes the other side', async () => {
  const { java, raw, client } = env
  const name = unique('sync-sem-if-exists')
  const sem = client.semaphore(name)
  assert.equal(await java.ok(`semReleaseIfExists ${name} 2`), 'false')
  assert.equal(await sem.releaseIfExists(2), false)
  assert.equal(await raw.command('EXISTS', name), 0)
  assert.equal(await java.ok(`semTrySet ${name} 0`), 'true')

  java.send(`semAcquire ${name} 2 20000`) // Java waits for 2; our releaseIfExists wakes it
  await waitUntil(async () => (await raw.numsub(semChannel(name))) > 0, 'Java to wait on the semaphore')
  assert.equal(java.hasReply(), false)
  assert.equal(await sem.releaseIfExists(2), true)
  assert.equal(java.expectOk(await java.reply(WITHIN)), 'true')

  const waiting = background(() => sem.acquire({ permits: 2, wait: 20000 })) // and the other way
  await waitUntil(async () => (await raw.numsub(semChannel(name))) > 0, 'our acquire to wait')
  await sleep(200)
  assert.equal(waiting.done, false)
  assert.equal(await java.ok(`semReleaseIfExists ${name} 3`), 'true')
  await within(waiting.promise, WITHIN, 'our acquire to be woken by Java\'s releaseIfExists')
  assert.equal(waiting.error, null)
  assert.equal(await raw.command('GET', name), '1')
  assert.equal(await sem.delete(), true)
  assert.equal(await java.ok(`semReleaseIfExists ${name} 1`), 'false')
  assert.equal(await raw.command('EXISTS', name), 0)
})

test('a permit id travels between Java and us, and a released id is refused on both sides', async () => {
  const { java, raw, client } = env
  const name = unique('sync-pes')
  const sem = client.permitExpirableSemaphore(name)
  assert.equal(await java.ok(`pesTrySet ${name} 2`), 'true')
  const javaId = await java.ok(`pesAcquire ${name} 0 60000`)
  assert.match(javaId, /^[0-9a-f]{32}$/)
  assert.equal(await sem.availablePermits(), 1)
  assert.ok((await sem.remainingLease(javaId)) > 30000) // we see Java's permit and its lease
  await sem.release(javaId) // a Java permit, released by us
  assert.equal(await java.ok(`pesAvailable ${name}`), '2')
  await assert.rejects(sem.release(javaId), NotHeldError)
  assert.equal(await java.ok(`pesTryRelease ${name} ${javaId}`), 'false')

  const permit = await sem.acquire({ wait: 1000, lease: 60000 })
  assert.match(permit.id, /^[0-9a-f]{32}$/)
  assert.equal(await java.ok(`pesAvailable ${name}`), '1')
  assert.equal(await java.ok(`pesUpdateLease ${name} ${permit.id} 120000`), 'true')
  assert.ok((await sem.remainingLease(permit.id)) > 60000)
  await java.ok(`pesRelease ${name} ${permit.id}`) // our permit, released by Java
  assert.equal(await sem.availablePermits(), 2)
  assert.equal(await sem.tryRelease(permit.id), false)
  assert.equal(await java.ok(`pesTryRelease ${name} ${permit.id}`), 'false')
  assert.equal(await raw.command('ZCARD', `{${name}}:timeout`), 0)
})

test('an expired Java permit comes back to our waiter, and our release wakes Java', async () => {
  const { java, raw, client } = env
  const name = unique('sync-pes-expiry')
  const sem = client.permitExpirableSemaphore(name)
  assert.equal(await sem.trySetPermits(1), true)
  assert.notEqual(await java.ok(`pesAcquire ${name} 0 700`), 'null') // a 0.7 s lease, never released
  assert.equal(await sem.tryAcquire(), null)
  const permit = await within(sem.acquire({ wait: 20000, lease: 60000 }), 25000, 'the expired permit to be reclaimed')
  assert.equal(await raw.command('ZCARD', `{${name}}:timeout`), 1)

  java.send(`pesAcquire ${name} 20000 60000`) // Java waits for our permit
  await waitUntil(async () => (await raw.numsub(semChannel(name))) > 0, 'Java to wait on the semaphore')
  assert.equal(java.hasReply(), false)
  await permit.release()
  const javaId = java.expectOk(await java.reply(WITHIN))
  assert.match(javaId, /^[0-9a-f]{32}$/)
  assert.notEqual(javaId, permit.id)
  await java.ok(`pesRelease ${name} ${javaId}`)
  assert.equal(await sem.availablePermits(), 1)
})

test('a latch counted down by one side opens the other side\'s waiters', async () => {
  const { java, raw, client } = env
  const name = unique('sync-latch')
  const latch = client.countDownLatch(name)
  assert.equal(await latch.trySetCount(2), true)
  assert.equal(await java.ok(`latchTrySet ${name} 5`), 'false') // already counting
  assert.equal(await java.ok(`latchCount ${name}`), '2')
  java.send(`latchAwait ${name} 20000`)
  await waitUntil(async () => (await raw.numsub(latchChannel(name))) > 0, 'Java to await the latch')
  await latch.countDown()
  assert.equal(java.hasReply(), false)
  await latch.countDown()
  assert.equal(java.expectOk(await java.reply(WITHIN)), 'true')
  assert.equal(await raw.command('EXISTS', name), 0)

  assert.equal(await java.ok(`latchTrySet ${name} 2`), 'true')
  assert.equal(await latch.count(), 2)
  const waiting = background(() => latch.wait({ wait: 20000 }))
  await waitUntil(async () => (await raw.numsub(latchChannel(name))) > 0, 'our wait to subscribe')
  await java.ok(`latchCountDown ${name}`)
  await sleep(200)
  assert.equal(waiting.done, false)
  await java.ok(`latchCountDown ${name}`)
  await within(waiting.promise, WITHIN, 'our wait to be opened by Java')
  assert.equal(waiting.error, null)
  assert.equal(await latch.count(), 0)
  assert.equal(await java.ok(`latchCount ${name}`), '0')
})
