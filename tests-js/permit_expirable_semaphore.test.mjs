// PermitExpirableSemaphore: permits with 32-hex ids stored in Redisson's {name}:timeout sorted set,
// released by id from any client, a released id refused, expired permits reclaimed for waiters,
// the watchdog keeping a permit taken without a lease, the lost-permit signal, wait limits, and
// AbortSignal cancellation that takes nothing. Redis is read with a plain connection.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { LockTimeoutError, LockLostError, NotHeldError } = crosslock

const env = useRedis()

const timeoutKey = (name) => `{${name}}:timeout`
const scChannel = (name) => `redisson_sc:{${name}}`

let other, watched
const connectClients = async () => {
  other ??= await env.connect()
  watched ??= await env.connect({ watchdogTimeout: 600 })
}

describe('permits and ids', () => {
  before(connectClients)

  test('acquire returns a permit with a 32-hex id, counted in {name}:timeout; release gives it back', async () => {
    const name = unique('pes')
    const sem = env.client.permitExpirableSemaphore(name)
    assert.equal(await sem.trySetPermits(2), true)
    assert.equal(await sem.trySetPermits(9), false)
    const a = await sem.acquire({ lease: 60_000 })
    const b = await sem.acquire({ lease: 60_000 })
    for (const p of [a, b]) assert.match(p.id, /^[0-9a-f]{32}$/)
    assert.notEqual(a.id, b.id)
    assert.equal(await env.raw.command('GET', name), '0')
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 2)
    const lease = await sem.remainingLease(a.id)
    assert.ok(lease > 55_000 && lease <= 60_000, `remainingLease ${lease}`)
    assert.equal(await sem.availablePermits(), 0)
    assert.equal(await other.permitExpirableSemaphore(name).tryAcquire(), null)
    await a.release()
    assert.equal(await env.raw.command('GET', name), '1')
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)
    await b.release()
    assert.equal(await env.raw.command('EXISTS', timeoutKey(name)), 0)
    assert.equal(await sem.availablePermits(), 2)
  })

  test('another client releases a permit by its id; the released id is then refused with NotHeldError, changing nothing', async () => {
    const name = unique('byid')
    const sem = env.client.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const permit = await sem.acquire({ lease: 60_000 })
    await other.permitExpirableSemaphore(name).release(permit.id)
    assert.equal(await env.raw.command('GET', name), '1')
    assert.equal(await env.raw.command('EXISTS', timeoutKey(name)), 0)
    const retaken = await other.permitExpirableSemaphore(name).acquire({ lease: 60_000 })
    for (const again of [() => other.permitExpirableSemaphore(name).release(permit.id), () => permit.release()]) {
      const err = await again().then(() => assert.fail('a released id was released again'), (e) => e)
      assert.ok(err instanceof NotHeldError, String(err))
      assert.equal(err.lockName, name)
      assert.ok(err.message.includes(permit.id), err.message)
    }
    assert.equal(await other.permitExpirableSemaphore(name).tryRelease(permit.id), false)
    assert.equal(await env.raw.command('GET', name), '0', "refused releases gave back the new holder's permit")
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)
    await retaken.release()
  })
})

describe('expiry and the watchdog', () => {
  before(connectClients)

  test('a permit whose lease ran out is reclaimed: a waiter gets it without any release', async () => {
    const name = unique('expire')
    const sem = env.client.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const leased = await sem.acquire({ lease: 300 })
    const next = await within(other.permitExpirableSemaphore(name).acquire({ lease: 60_000 }), 5000, 'the waiter to get the expired permit')
    assert.notEqual(next.id, leased.id)
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)
    if (!leased.lost) await within(once(leased.signal, 'abort'), 5000, "the expired permit's signal to abort")
    assert.ok(leased.signal.reason instanceof LockLostError, String(leased.signal.reason))
    await assert.rejects(leased.release(), NotHeldError)
    assert.equal(await env.raw.command('GET', name), '0', 'releasing the reclaimed permit counted it twice')
    await next.release()
    assert.equal(await sem.availablePermits(), 1)
  })

  test('the watchdog keeps a permit taken without a lease past a 600 ms watchdog timeout', async () => {
    const name = unique('watchdog')
    const sem = watched.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const permit = await sem.acquire()
    await sleep(3 * 600) // three leases: without renewal it would have expired
    assert.equal(permit.lost, false)
    const lease = await sem.remainingLease(permit.id)
    assert.ok(lease > 0 && lease <= 600, `remainingLease ${lease} should be a renewed 600 ms lease`)
    assert.equal(await other.permitExpirableSemaphore(name).tryAcquire(), null, 'the kept permit was handed to another client')
    assert.equal(await env.raw.command('GET', name), '0')
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)
    await permit.release()
    assert.equal(await env.raw.command('GET', name), '1')
  })

  test('a permit released by another client aborts permit.signal with LockLostError', async () => {
    const name = unique('lost')
    const sem = watched.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const permit = await sem.acquire()
    const aborted = once(permit.signal, 'abort')
    await other.permitExpirableSemaphore(name).release(permit.id)
    await within(aborted, 5000, 'permit.signal to abort')
    assert.equal(permit.lost, true)
    const reason = permit.signal.reason
    assert.ok(reason instanceof LockLostError, String(reason))
    assert.equal(reason.lockName, name)
    assert.ok(reason.message.includes(permit.id), reason.message)
    await assert.rejects(permit.release(), NotHeldError)
    assert.equal(await env.raw.command('GET', name), '1')
  })
})

describe('waiting', () => {
  before(connectClients)

  test('wait limits: tryAcquire resolves null, acquire({ wait }) rejects with LockTimeoutError naming the semaphore', async () => {
    const name = unique('limit')
    const sem = env.client.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const held = await sem.acquire({ lease: 60_000 })
    const mine = other.permitExpirableSemaphore(name)
    assert.equal(await mine.tryAcquire(), null)
    assert.equal(await mine.tryAcquire({ wait: 150 }), null)
    const err = await mine.acquire({ wait: 200 }).then(() => assert.fail('acquired'), (e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
    assert.equal(err.code, 'TIMEOUT')
    assert.equal(err.lockName, name)
    assert.ok(err.message.includes(name), err.message)
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 0, 'the timed-out waiters to unsubscribe', 5000)
    await held.release()
    assert.equal(await env.raw.command('GET', name), '1')
  })

  test('a waiter is woken by a release; an aborted waiter rejects with the reason, takes nothing, leaves no subscription', async () => {
    const name = unique('abort')
    const sem = env.client.permitExpirableSemaphore(name)
    await sem.trySetPermits(1)
    const held = await sem.acquire({ lease: 60_000 })

    const controller = new AbortController()
    const aborted = other.permitExpirableSemaphore(name).acquire({ signal: controller.signal })
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the waiter to subscribe to redisson_sc:{name}')
    const reason = new Error('not any more')
    controller.abort(reason)
    await assert.rejects(within(aborted, 5000, 'the aborted acquire to reject'), (e) => e === reason)
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 0, 'PUBSUB NUMSUB to drop to 0', 5000)
    assert.equal(other.subscribedChannels(), 0)
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1)

    const waiting = other.permitExpirableSemaphore(name).acquire({ lease: 60_000 })
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the second waiter to subscribe')
    await held.release()
    const next = await within(waiting, 5000, 'the waiter to be woken by the release')
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 1, 'the cancelled waiter took a permit as well')
    assert.equal(await env.raw.command('GET', name), '0')
    await next.release()
    assert.equal(await env.raw.command('GET', name), '1')
  })
})
