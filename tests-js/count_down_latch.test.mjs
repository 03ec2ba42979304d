// CountDownLatch: Redisson's layout (the count as a string at the name, 0 published on
// redisson_countdownlatch__channel__{name} at zero), waiters on separate clients released together
// by the last countDown, wait limits, and AbortSignal cancellation leaving no subscription.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'

import { Subscriber } from './helpers/resp.mjs'
import { crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { LockTimeoutError } = crosslock

const env = useRedis()

const latchChannel = (name) => `redisson_countdownlatch__channel__{${name}}`

let clients
const connectClients = async () => {
  clients ??= await Promise.all(Array.from({ length: 4 }, () => env.connect()))
}

describe('counting down', () => {
  before(connectClients)

  test('trySetCount sets the count once, stored as a string at the name', async () => {
    const name = unique('latch')
    const latch = env.client.countDownLatch(name)
    assert.equal(await latch.trySetCount(3), true)
    assert.equal(await clients[0].countDownLatch(name).trySetCount(5), false, 'reset while counting')
    assert.equal(await env.raw.command('TYPE', name), 'string')
    assert.equal(await env.raw.command('GET', name), '3')
    assert.equal(await latch.count(), 3)
    assert.equal(await clients[0].countDownLatch(name).countDown(), 2)
    assert.equal(await env.raw.command('GET', name), '2')
  })

  test('3 waiters on 3 clients are all released by the countDown that reaches 0, and not before', async () => {
    const name = unique('gate')
    await env.client.countDownLatch(name).trySetCount(3)
    const opened = []
    const waiters = clients.slice(0, 3).map((c, i) => c.countDownLatch(name).wait().then(() => opened.push(i)))
    await waitUntil(async () => (await env.raw.numsub(latchChannel(name))) === 3, 'the 3 waiters to subscribe')
    const sub = await Subscriber.subscribe(env.url, latchChannel(name))
    try {
      assert.equal(await clients[3].countDownLatch(name).countDown(), 2)
      assert.equal(await clients[3].countDownLatch(name).countDown(), 1)
      // Every waiter answers a query after the count went to 1: none has been released.
      for (const c of clients.slice(0, 3)) assert.equal(await c.countDownLatch(name).count(), 1)
      assert.deepEqual(opened, [])
      assert.equal(await clients[3].countDownLatch(name).countDown(), 0)
      assert.equal(await sub.next(), '0')
    } finally {
      await sub.close()
    }
    await within(Promise.all(waiters), 5000, 'every waiter to be released')
    assert.deepEqual(opened.sort(), [0, 1, 2])
    assert.equal(await env.raw.command('EXISTS', name), 0, 'an open latch keeps no key')
    await waitUntil(async () => (await env.raw.numsub(latchChannel(name))) === 0, 'the released waiters to unsubscribe', 5000)
    // Counting down an open latch keeps it open.
    assert.equal(await env.client.countDownLatch(name).countDown(), 0)
    assert.equal(await env.raw.command('EXISTS', name), 0)
    // And it can be set again.
    assert.equal(await env.client.countDownLatch(name).trySetCount(1), true)
    assert.equal(await env.raw.command('GET', name), '1')
  })

  test('waiting on an open latch (never set, or counted down) resolves at once', async () => {
    const name = unique('open')
    await within(env.client.countDownLatch(name).wait(), 5000, 'wait() on a never-set latch')
    await within(env.client.countDownLatch(name).wait({ wait: 0 }), 5000, 'wait({ wait: 0 }) on an open latch')
    assert.equal(await env.raw.numsub(latchChannel(name)), 0)
  })
})

describe('giving up', () => {
  before(connectClients)

  test('wait({ wait }) rejects with LockTimeoutError naming the latch, leaving the count and no subscription', async () => {
    const name = unique('limit')
    await env.client.countDownLatch(name).trySetCount(2)
    const err = await clients[0].countDownLatch(name).wait({ wait: 200 }).then(() => assert.fail('opened'), (e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
    assert.equal(err.code, 'TIMEOUT')
    assert.equal(err.lockName, name)
    assert.ok(err.message.includes(name), err.message)
    await assert.rejects(clients[0].countDownLatch(name).wait({ wait: 0 }), LockTimeoutError)
    assert.equal(await env.raw.command('GET', name), '2')
    await waitUntil(async () => (await env.raw.numsub(latchChannel(name))) === 0, 'the timed-out waiter to unsubscribe', 5000)
    assert.equal(clients[0].subscribedChannels(), 0)
  })

  test('aborting a waiter rejects with the reason and leaves no subscription; the others still open', async () => {
    const name = unique('abort')
    await env.client.countDownLatch(name).trySetCount(1)
    const controller = new AbortController()
    const aborted = clients[0].countDownLatch(name).wait({ signal: controller.signal })
    const staying = clients[1].countDownLatch(name).wait()
    await waitUntil(async () => (await env.raw.numsub(latchChannel(name))) === 2, 'both waiters to subscribe')
    const reason = new Error('shutting down')
    controller.abort(reason)
    await assert.rejects(within(aborted, 5000, 'the aborted wait to reject'), (e) => e === reason)
    await waitUntil(async () => (await env.raw.numsub(latchChannel(name))) === 1, 'PUBSUB NUMSUB to drop to 1', 5000)
    assert.equal(clients[0].subscribedChannels(), 0)
    assert.equal(await env.raw.command('GET', name), '1', 'an aborted wait changed the count')
    await assert.rejects(clients[0].countDownLatch(name).wait({ signal: AbortSignal.abort('stop') }), (e) => e === 'stop')
    await env.client.countDownLatch(name).countDown()
    await within(staying, 5000, 'the remaining waiter to be released')
  })
})
