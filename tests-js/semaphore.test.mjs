// Semaphore: Redisson's layout (the permits available as a string at the name, releases on
// redisson_sc:{name}), never more permits granted than set (measured by an independent INCR/DECR
// detector key), waiters woken by a release from another client, multi-permit waits, wait limits,
// and AbortSignal cancellation that takes no permit and leaves no subscription.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { Subscriber } from './helpers/resp.mjs'
import { crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { LockTimeoutError } = crosslock

const env = useRedis()

const scChannel = (name) => `redisson_sc:{${name}}`

let clients
const connectClients = async () => {
  clients ??= await Promise.all(Array.from({ length: 8 }, () => env.connect()))
}

describe('permits', () => {
  before(connectClients)

  test('trySetPermits sets the count once; permits are a string at the name; a release publishes the count', async () => {
    const name = unique('sem')
    const sem = env.client.semaphore(name)
    assert.equal(await sem.availablePermits(), 0, 'an unset semaphore has no permits')
    assert.equal(await sem.trySetPermits(3), true)
    assert.equal(await clients[0].semaphore(name).trySetPermits(5), false)
    assert.equal(await env.raw.command('TYPE', name), 'string')
    assert.equal(await env.raw.command('GET', name), '3')
    assert.equal(await sem.availablePermits(), 3)
    await sem.acquire({ permits: 2 })
    assert.equal(await env.raw.command('GET', name), '1')
    const sub = await Subscriber.subscribe(env.url, scChannel(name))
    try {
      await clients[0].semaphore(name).release(2)
      assert.equal(await sub.next(), '3')
    } finally {
      await sub.close()
    }
    assert.equal(await env.raw.command('GET', name), '3')
  })

  test('3 permits admit 3 clients at once and refuse the 4th', async () => {
    const name = unique('three')
    await env.client.semaphore(name).trySetPermits(3)
    for (const client of clients.slice(0, 3)) assert.equal(await client.semaphore(name).tryAcquire(), true)
    assert.equal(await clients[3].semaphore(name).tryAcquire(), false)
    assert.equal(await env.raw.command('GET', name), '0')
    await env.client.semaphore(name).release(3)
    assert.equal(await clients[3].semaphore(name).tryAcquire(), true)
  })

  test('8 tasks on 8 clients contending for 3 permits: never more than 3 inside (independent INCR/DECR detector)', async () => {
    const name = unique('contend')
    const detector = `${name}:inside`
    await env.client.semaphore(name).trySetPermits(3)
    let max = 0
    const task = async (client) => {
      const sem = client.semaphore(name)
      for (let i = 0; i < 5; i++) {
        await sem.acquire()
        try {
          const inside = await env.raw.command('INCR', detector)
          max = Math.max(max, inside)
          await sleep(2)
          await env.raw.command('DECR', detector)
        } finally {
          await sem.release()
        }
      }
    }
    await within(Promise.all(clients.map(task)), 30_000, '8 contending tasks')
    assert.ok(max <= 3, `${max} holders inside at once with 3 permits`)
    assert.equal(Number(await env.raw.command('GET', detector)), 0)
    assert.equal(await env.raw.command('GET', name), '3', 'every permit came back')
  })

  test('addPermits, drainPermits and withPermits', async () => {
    const name = unique('ops')
    const sem = env.client.semaphore(name)
    await sem.trySetPermits(2)
    assert.equal(await sem.addPermits(3), 5)
    assert.equal(await sem.addPermits(-1), 4)
    assert.equal(await sem.drainPermits(), 4)
    assert.equal(await env.raw.command('GET', name), '0')
    await sem.release(2)
    assert.equal(await sem.withPermits(async () => {
      assert.equal(await env.raw.command('GET', name), '0')
      return 'done'
    }, { permits: 2 }), 'done')
    await assert.rejects(sem.withPermits(async () => { throw new Error('boom') }), /boom/)
    assert.equal(await env.raw.command('GET', name), '2', 'withPermits gave its permits back')
  })
})

describe('waiting', () => {
  before(connectClients)

  test('a waiter is woken by a release from another client', async () => {
    const name = unique('wake')
    await env.client.semaphore(name).trySetPermits(0)
    const waiting = clients[0].semaphore(name).acquire()
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the waiter to subscribe to redisson_sc:{name}')
    await clients[1].semaphore(name).release()
    await within(waiting, 5000, 'the waiter to be woken by the release')
    assert.equal(await env.raw.command('GET', name), '0')
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 0, 'the served waiter to unsubscribe', 5000)
  })

  test('releaseIfExists leaves an absent semaphore absent, and into an existing one releases and wakes a waiter', async () => {
    const name = unique('if-exists')
    const sem = env.client.semaphore(name)
    assert.equal(await sem.releaseIfExists(2), false)
    assert.equal(await env.raw.command('EXISTS', name), 0, 'releaseIfExists created the semaphore')
    await assert.rejects(sem.releaseIfExists(0), (e) => e.code === 'INVALID_ARGUMENT')
    assert.equal(await sem.trySetPermits(0), true)
    const waiting = clients[0].semaphore(name).acquire({ permits: 2 })
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the waiter to subscribe')
    assert.equal(await sem.releaseIfExists(3), true)
    await within(waiting, 5000, 'the waiter to be woken by releaseIfExists')
    assert.equal(await env.raw.command('GET', name), '1')
  })

  test('a waiter for 2 permits takes none until 2 are available', async () => {
    const name = unique('two')
    await env.client.semaphore(name).trySetPermits(0)
    let acquired = false
    const waiting = clients[0].semaphore(name).acquire({ permits: 2 }).then(() => { acquired = true })
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the waiter to subscribe')
    await clients[1].semaphore(name).release()
    // The waiter may look at the single permit; it must leave it there.
    await clients[1].semaphore(name).tryAcquire().then((taken) => assert.equal(taken, true, 'the single permit was taken by a waiter for 2'))
    await clients[1].semaphore(name).release()
    assert.equal(acquired, false)
    await clients[2].semaphore(name).release()
    await within(waiting, 5000, 'the waiter to take 2 permits')
    assert.equal(await env.raw.command('GET', name), '0')
  })

  test('wait limits: acquire({ wait }) rejects with LockTimeoutError naming the semaphore; tryAcquire resolves false; nothing taken', async () => {
    const name = unique('limit')
    await env.client.semaphore(name).trySetPermits(1)
    const sem = clients[0].semaphore(name)
    assert.equal(await sem.tryAcquire({ permits: 2 }), false)
    assert.equal(await sem.tryAcquire({ permits: 2, wait: 100 }), false)
    await env.client.semaphore(name).acquire()
    assert.equal(await sem.tryAcquire(), false)
    assert.equal(await sem.tryAcquire({ wait: 150 }), false)
    const err = await sem.acquire({ wait: 200 }).then(() => assert.fail('acquired'), (e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
    assert.equal(err.code, 'TIMEOUT')
    assert.equal(err.lockName, name)
    assert.ok(err.message.includes(name), err.message)
    assert.equal(await env.raw.command('GET', name), '0')
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 0, 'the timed-out waiters to unsubscribe', 5000)
    await env.client.semaphore(name).release()
    assert.equal(await env.raw.command('GET', name), '1', 'a timed-out waiter took the permit later')
  })

  test('aborting a waiter rejects with the reason, takes no permit and leaves no subscription', async () => {
    const name = unique('abort')
    await env.client.semaphore(name).trySetPermits(0)
    const waiter = clients[0]
    const controller = new AbortController()
    const waiting = waiter.semaphore(name).acquire({ signal: controller.signal })
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 1, 'the waiter to subscribe')
    const reason = new Error('no longer needed')
    controller.abort(reason)
    await assert.rejects(within(waiting, 5000, 'the aborted acquire to reject'), (e) => e === reason)
    await waitUntil(async () => (await env.raw.numsub(scChannel(name))) === 0, 'PUBSUB NUMSUB to drop to 0', 5000)
    assert.equal(waiter.subscribedChannels(), 0)
    await clients[1].semaphore(name).release()
    assert.equal(await env.raw.command('GET', name), '1', 'the cancelled waiter took the released permit')
    // A signal aborted beforehand takes nothing even with a permit free.
    await assert.rejects(waiter.semaphore(name).acquire({ signal: AbortSignal.abort('stop') }), (e) => e === 'stop')
    assert.equal(await env.raw.command('GET', name), '1')
  })
})
