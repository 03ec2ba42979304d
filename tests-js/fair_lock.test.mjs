// FairLock: waiters on separate clients are served in the order they queued, each woken on its
// own channel; a waiter that gives up leaves the queue without disturbing the order; a newcomer
// never jumps a live queue, and a dead queue head is skipped. Queue and deadlines are read with a
// plain connection: Redisson's redisson_lock_queue:{name} list and redisson_lock_timeout:{name}
// sorted set.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'

import { channelOf, crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { LockTimeoutError, newOwner } = crosslock

const env = useRedis()

const queueKey = (name) => `redisson_lock_queue:{${name}}`
const timeoutKey = (name) => `redisson_lock_timeout:{${name}}`

// Five more clients (made once, after useRedis's server is up: root-level hooks may run first).
let clients
const connectClients = async () => {
  clients ??= await Promise.all(Array.from({ length: 5 }, () => env.connect()))
}

const queueOf = (name) => env.raw.command('LRANGE', queueKey(name), 0, -1)

/** Starts a waiter on `client` as a fresh owner; resolves once it is last in the queue. */
async function enqueue (client, name, options = {}) {
  const owner = newOwner()
  const holder = `${client.id}:${owner}`
  const lock = client.fairLock(name)
  const promise = lock.acquire({ owner, ...options })
  promise.catch(() => {}) // observed by the test
  await waitUntil(async () => {
    const queue = await queueOf(name)
    return queue.at(-1) === holder && (await env.raw.numsub(`${channelOf(name)}:${holder}`)) === 1
  }, `${holder} to queue and subscribe to its own channel`)
  return { owner, holder, lock, promise }
}

describe('FIFO hand-over', () => {
  before(connectClients)

  test('5 waiters on 5 clients get the lock in the order they queued, each woken on its own channel', async () => {
    const name = unique('fifo')
    const first = await env.client.fairLock(name).acquire()
    const waiters = []
    for (const client of clients) waiters.push(await enqueue(client, name))
    const holders = waiters.map((w) => w.holder)
    assert.deepEqual(await queueOf(name), holders)
    // Deadlines in Redis follow the queue order.
    const deadlines = await env.raw.command('ZRANGE', timeoutKey(name), 0, -1, 'WITHSCORES')
    assert.deepEqual(deadlines.filter((_, i) => i % 2 === 0), holders)
    const scores = deadlines.filter((_, i) => i % 2 === 1).map(Number)
    for (let i = 1; i < scores.length; i++) assert.ok(scores[i] > scores[i - 1], `deadlines out of order: ${scores}`)
    // Nobody waits on the shared channel: a release wakes only the head.
    assert.equal(await env.raw.numsub(channelOf(name)), 0)

    const order = []
    const served = waiters.map(async (w, i) => {
      const held = await w.promise
      order.push(i)
      assert.deepEqual(await env.raw.hgetall(name), { [w.holder]: '1' })
      assert.ok(!(await queueOf(name)).includes(w.holder), `${w.holder} still queued while holding`)
      await held.release()
    })
    await first.release()
    await within(Promise.all(served), 15_000, 'every waiter to be served')
    assert.deepEqual(order, [0, 1, 2, 3, 4])
    assert.equal(await env.raw.command('EXISTS', name, queueKey(name), timeoutKey(name)), 0)
  })

  test('a waiter that aborts or times out leaves the queue; those behind it keep their order', async () => {
    const name = unique('giveup')
    const first = await env.client.fairLock(name).acquire()
    const a = await enqueue(clients[0], name)
    const controller = new AbortController()
    const b = await enqueue(clients[1], name, { signal: controller.signal })
    const c = await enqueue(clients[2], name)
    const d = await enqueue(clients[3], name)

    const reason = new Error('b gave up')
    controller.abort(reason)
    await assert.rejects(within(b.promise, 5000, "b's acquire to reject"), (e) => e === reason)
    assert.deepEqual(await queueOf(name), [a.holder, c.holder, d.holder])
    assert.equal(await env.raw.command('ZSCORE', timeoutKey(name), b.holder), null)
    await waitUntil(async () => (await env.raw.numsub(`${channelOf(name)}:${b.holder}`)) === 0, "b's channel to lose its subscriber", 5000)

    // A short wait limit that passes while queued leaves the same way.
    const e = clients[4].fairLock(name).acquire({ wait: 200, owner: newOwner() })
    await assert.rejects(e, LockTimeoutError)
    assert.deepEqual(await queueOf(name), [a.holder, c.holder, d.holder])
    assert.equal(await env.raw.command('ZCARD', timeoutKey(name)), 3)

    const order = []
    const served = [a, c, d].map(async (w) => {
      const held = await w.promise
      order.push(w.holder)
      await held.release()
    })
    await first.release()
    await within(Promise.all(served), 15_000, 'the remaining waiters to be served')
    assert.deepEqual(order, [a.holder, c.holder, d.holder])
    assert.equal(await env.raw.command('EXISTS', name, queueKey(name), timeoutKey(name)), 0)
  })

})

describe('queue discipline', () => {
  before(connectClients)

  test('a newcomer does not take a free lock while a live waiter (any language) heads the queue', async () => {
    const name = unique('nojump')
    // A waiter of another process, written as Redisson writes one: queued, deadline a minute on.
    const ghost = '7b0c2a1e-0000-4000-8000-000000000000:1'
    await env.raw.command('RPUSH', queueKey(name), ghost)
    await env.raw.command('ZADD', timeoutKey(name), Date.now() + 60_000, ghost)
    const lock = env.client.fairLock(name)
    assert.equal(await lock.tryAcquire(), null, 'jumped the queue')
    assert.equal(await env.raw.command('EXISTS', name), 0)
    assert.deepEqual(await queueOf(name), [ghost], 'a single try must not join the queue')
    // Once that waiter has gone, the lock is free for the newcomer.
    await env.raw.command('LREM', queueKey(name), 0, ghost)
    await env.raw.command('ZREM', timeoutKey(name), ghost)
    const held = await lock.tryAcquire()
    assert.ok(held)
    await held.release()
  })

  test('a queue head whose deadline passed (a crashed waiter) is skipped', async () => {
    const name = unique('deadhead')
    const ghost = '7b0c2a1e-0000-4000-8000-000000000001:1'
    await env.raw.command('RPUSH', queueKey(name), ghost)
    await env.raw.command('ZADD', timeoutKey(name), Date.now() - 1000, ghost)
    const held = await env.client.fairLock(name).acquire({ wait: 5000 })
    assert.deepEqual(await env.raw.hgetall(name), { [held.holder]: '1' })
    assert.equal(await env.raw.command('EXISTS', queueKey(name), timeoutKey(name)), 0, 'the dead waiter was not purged')
    await held.release()
  })

  test('a fair lock excludes a plain Lock holder of the same name', async () => {
    const name = unique('mixed')
    const plain = await env.client.lock(name).acquire()
    assert.equal(await clients[0].fairLock(name).tryAcquire(), null)
    await plain.release()
    const fair = await clients[0].fairLock(name).acquire({ wait: 5000 })
    assert.equal(await env.client.lock(name).tryAcquire(), null)
    await fair.release()
  })
})
