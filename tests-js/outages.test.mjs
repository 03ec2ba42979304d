// Redis out of reach, as users meet it (the Node side of tests-faults/test_outages.py):
// - every object's wait rides out a restart of about a second (shorter than the connect timeout),
//   with and without AOF;
// - an outage is never "busy": a wait that ends without Redis answering rejects with UNAVAILABLE
//   (never LockTimeoutError, whatever the wait), a busy lock still with LockTimeoutError;
// - a single try is bounded by the response timeout;
// - the release of a hold already known lost rejects with LockLostError at once.
import assert from 'node:assert/strict'
import { test } from 'node:test'

import { startRedis } from './helpers/redis-server.mjs'
import { ask, crosslock, waitUntil } from './helpers/util.mjs'

const { LockLostError, LockTimeoutError, MultiLock } = crosslock

const RESPONSE = 1000
const SLACK = 350

const KINDS = {
  Lock: (c, n) => c.lock(n),
  FairLock: (c, n) => c.fairLock(n),
  SpinLock: (c, n) => c.spinLock(n),
  FencedLock: (c, n) => c.fencedLock(n),
  NonReentrantLock: (c, n) => c.nonReentrantLock(n),
  WriteLock: (c, n) => c.readWriteLock(n).writeLock(),
  ReadLock: (c, n) => c.readWriteLock(n).readLock()
}
/** What excludes a holder of each kind (readers share: a writer excludes them). */
const RIVAL = (kind) => (kind === 'ReadLock' ? 'WriteLock' : kind)

/** How many scripts the server at `port` has run (EVAL, EVALSHA, FCALL). */
async function scriptCalls (port) {
  const info = String(await ask(port, 'INFO', 'commandstats'))
  let calls = 0
  for (const m of info.matchAll(/^cmdstat_(?:eval|evalsha|fcall):calls=(\d+)/gm)) calls += Number(m[1])
  return calls
}

/** Whether the server at `port` ran no script for `ms`. */
async function quiet (port, ms) {
  const before = await scriptCalls(port)
  await new Promise((resolve) => setTimeout(resolve, ms))
  return (await scriptCalls(port)) === before
}

/** How `promise` settled, and how long that took. */
async function timed (promise) {
  const started = Date.now()
  try {
    return { value: await promise, ms: Date.now() - started }
  } catch (error) {
    return { error, ms: Date.now() - started }
  }
}

function assertUnavailable (what, got, boundMs) {
  assert.equal(got.error?.code, 'UNAVAILABLE', `${what}: ${got.error ?? `resolved ${got.value}`}`)
  assert.ok(got.ms <= boundMs + SLACK, `${what}: took ${got.ms} ms`)
}

for (const persistence of ['none', 'aof']) {
  test(`every wait rides out a one-second restart (${persistence})`, async () => {
    const args = persistence === 'aof' ? ['--appendonly', 'yes', '--appendfsync', 'always'] : []
    const server = await startRedis({ args })
    const options = { connectTimeout: 6000, responseTimeout: RESPONSE }
    const holder = await crosslock.connect(server.url, options)
    const waiter = await crosslock.connect(server.url, options)
    try {
      // Held with a lease: with AOF the holds outlive the restart and expire after it.
      for (const kind of Object.keys(KINDS)) {
        await KINDS[RIVAL(kind)](holder, `r:${kind}`).acquire({ wait: 5000, lease: 3000 })
      }
      for (const part of ['r:m1', 'r:m2']) await holder.lock(part).acquire({ wait: 5000, lease: 3000 })
      assert.ok(await waiter.semaphore('r:sem').trySetPermits(0))
      assert.ok(await waiter.permitExpirableSemaphore('r:pes').trySetPermits(0))
      assert.ok(await waiter.countDownLatch('r:latch').trySetCount(1))

      // The spin lock (it polls) starts last, once the others are idle.
      const waits = {}
      for (const [kind, make] of Object.entries(KINDS)) {
        if (kind !== 'SpinLock') waits[kind] = timed(make(waiter, `r:${kind}`).acquire())
      }
      waits.Semaphore = timed(waiter.semaphore('r:sem').acquire())
      waits.PermitExpirableSemaphore = timed(waiter.permitExpirableSemaphore('r:pes').acquire())
      waits.CountDownLatch = timed(waiter.countDownLatch('r:latch').wait())
      waits.MultiLock = timed(new MultiLock([waiter.lock('r:m1'), waiter.lock('r:m2')]).acquire())
      // Every waiter is waiting now: subscribed, each to its own channel, and idle, its attempt
      // after subscribing answered (a plain semaphore's attempt cut off in flight has an unknown
      // outcome, and fails by design: README, "What a plain Semaphore cannot know").
      const subscribed = Object.keys(waits).length
      await waitUntil(async () => (await ask(server.port, 'PUBSUB', 'CHANNELS', '*'))?.length >= subscribed, 'every waiter subscribed')
      await waitUntil(() => quiet(server.port, 100), 'every waiter idle')
      if ('SpinLock' in KINDS) waits.SpinLock = timed(KINDS.SpinLock(waiter, 'r:SpinLock').acquire())
      await server.restart(1000)

      const helper = await crosslock.connect(server.url)
      await helper.semaphore('r:sem').release(1)
      await helper.permitExpirableSemaphore('r:pes').addPermits(1)
      if (persistence === 'aof') await helper.countDownLatch('r:latch').countDown()
      for (const [what, wait] of Object.entries(waits)) {
        const got = await wait
        assert.equal(got.error, undefined, `${what}: the wait failed across the restart: ${got.error}`)
      }
      await helper.close()
    } finally {
      await holder.close()
      await waiter.close()
      await server.stop()
    }
  })
}

test('a busy lock times out and names its holder', async () => {
  const server = await startRedis()
  const holder = await crosslock.connect(server.url)
  const client = await crosslock.connect(server.url)
  try {
    for (const kind of Object.keys(KINDS)) await KINDS[RIVAL(kind)](holder, `b:${kind}`).acquire()
    for (const [kind, make] of Object.entries(KINDS)) {
      const lock = make(client, `b:${kind}`)
      await assert.rejects(lock.acquire({ wait: 200 }), (e) => e instanceof LockTimeoutError && /held by/.test(e.message), kind)
      assert.equal(await lock.tryAcquire(), null, kind)
    }
    assert.equal(await client.semaphore('b:sem').tryAcquire({ wait: 200 }), false)
  } finally {
    await holder.close()
    await client.close()
    await server.stop()
  }
})

test('every wait form rejects with UNAVAILABLE while Redis is down, and a single try is bounded', async () => {
  const server = await startRedis()
  const client = await crosslock.connect(server.url, { connectTimeout: 2000, responseTimeout: RESPONSE })
  try {
    await (await client.lock('d:warm').acquire({ wait: 1000 })).release()
    await server.kill()
    // Twice: the second round meets what the first left running (the issue saw
    // LockTimeoutError for one wait and UNAVAILABLE for another).
    for (const round of [0, 1]) {
      const waits = {}
      for (const [kind, make] of Object.entries(KINDS)) {
        waits[`${kind} acquire({ wait: 1000 })`] = timed(make(client, `d:${kind}`).acquire({ wait: 1000 }))
        waits[`${kind} tryAcquire({ wait: 1000 })`] = timed(make(client, `d:${kind}`).tryAcquire({ wait: 1000 }))
      }
      waits['Semaphore acquire({ wait: 1000 })'] = timed(client.semaphore('d:sem').acquire({ wait: 1000 }))
      waits['PermitExpirableSemaphore acquire({ wait: 1000 })'] = timed(client.permitExpirableSemaphore('d:pes').acquire({ wait: 1000 }))
      waits['CountDownLatch wait({ wait: 1000 })'] = timed(client.countDownLatch('d:latch').wait({ wait: 1000 }))
      waits['MultiLock acquire({ wait: 1000 })'] = timed(new MultiLock([client.lock('d:m1'), client.lock('d:m2')]).acquire({ wait: 1000 }))
      for (const [what, wait] of Object.entries(waits)) assertUnavailable(`round ${round}: ${what}`, await wait, 1000)
      // Longer than the outage tolerance: ends with it, the same kind.
      assertUnavailable(`round ${round}: acquire({ wait: 5000 })`, await timed(client.lock('d:Lock').acquire({ wait: 5000 })), 5000)
      // Each single try right after a wait on the same lock, whose abandoned attempt is still
      // being settled in the background: it does not wait for that longer than its own bound.
      for (const [kind, make] of Object.entries(KINDS)) {
        const lock = make(client, `s:${kind}`)
        assertUnavailable(`round ${round}: ${kind} acquire({ wait: 300 })`, await timed(lock.acquire({ wait: 300 })), 300)
        assertUnavailable(`round ${round}: ${kind} tryAcquire()`, await timed(lock.tryAcquire()), RESPONSE)
      }
      assertUnavailable(`round ${round}: Semaphore tryAcquire()`, await timed(client.semaphore('d:sem').tryAcquire()), RESPONSE)
      assertUnavailable(`round ${round}: PermitExpirableSemaphore tryAcquire()`, await timed(client.permitExpirableSemaphore('d:pes').tryAcquire()), RESPONSE)
    }
  } finally {
    await client.close()
    await server.stop()
  }
})

test('the release of a hold known lost rejects with LockLostError at once', async () => {
  const server = await startRedis()
  const client = await crosslock.connect(server.url, { connectTimeout: 2000, responseTimeout: 2000 })
  try {
    const held = {}
    for (const [kind, make] of Object.entries(KINDS)) held[kind] = await make(client, `l:${kind}`).acquire({ lease: 500 })
    await server.kill()
    await waitUntil(() => Object.values(held).every((h) => h.lost), 'every hold told lost')
    for (const [kind, h] of Object.entries(held)) {
      const got = await timed(h.release())
      assert.ok(got.error instanceof LockLostError, `${kind}: ${got.error ?? 'released'}`)
      assert.ok(got.ms < 1000, `${kind}: a release of a hold known lost waited ${got.ms} ms for Redis`)
    }
  } finally {
    await client.close()
    await server.stop()
  }
})
