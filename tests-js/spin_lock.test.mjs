// SpinLock: a waiter retries with a back-off and never subscribes (PUBSUB NUMSUB 0 while it
// waits, checked with a plain connection while MONITOR shows its retries), a release publishes
// nothing, it excludes Lock holders of the same name, and bad back-off options are refused.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import net from 'node:net'
import { before, describe, test } from 'node:test'

import { Subscriber } from './helpers/resp.mjs'
import { channelOf, crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { InvalidArgumentError } = crosslock

const env = useRedis()

let other
const connectOther = async () => { other ??= await env.connect() }

/** A MONITOR connection counting the scripts run on `name`: `count()`, `close()`. */
async function monitorScriptsOn (url, name) {
  const { hostname, port } = new URL(url)
  const socket = net.connect({ host: hostname, port: Number(port) })
  await once(socket, 'connect')
  socket.setEncoding('utf8')
  let buffer = ''
  let seen = 0
  socket.on('data', (chunk) => {
    buffer += chunk
    let end
    while ((end = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (/"EVAL(SHA)?"/i.test(line) && line.includes(` "${name}"`)) seen++
    }
  })
  socket.on('error', () => {})
  socket.write('MONITOR\r\n')
  return { count: () => seen, close: () => socket.destroy() }
}

describe('waiting without pub/sub', () => {
  before(connectOther)

  for (const [label, options] of [
    ["Redisson's default exponential back-off", undefined],
    ['a constant 20 ms back-off', { backoff: { kind: 'constant', initial: 20 } }],
    ['an exponential 2..16 ms back-off', { backoff: { kind: 'exponential', initial: 2, max: 16 } }]
  ]) {
    test(`with ${label}, a waiter retries with PUBSUB NUMSUB 0 and takes the lock after the release`, async () => {
      const name = unique('spin')
      const held = await env.client.spinLock(name, options).acquire()
      const monitor = await monitorScriptsOn(env.url, name)
      try {
        const waiting = other.spinLock(name, options).acquire()
        await waitUntil(() => monitor.count() >= 3, 'the waiter to retry 3 times')
        assert.equal(await env.raw.numsub(channelOf(name)), 0)
        assert.deepEqual(await env.raw.command('PUBSUB', 'CHANNELS', `*${name}*`), [], 'a spin waiter subscribed')
        assert.equal(other.subscribedChannels(), 0)
        assert.deepEqual(await env.raw.hgetall(name), { [held.holder]: '1' })
        await held.release()
        const mine = await within(waiting, 5000, 'the waiter to take the lock at its next retry')
        assert.deepEqual(await env.raw.hgetall(name), { [mine.holder]: '1' })
        assert.equal(await env.raw.numsub(channelOf(name)), 0)
        await mine.release()
      } finally {
        monitor.close()
      }
    })
  }

  test('a spin lock release publishes nothing on the lock channel', async () => {
    const name = unique('quiet')
    const sub = await Subscriber.subscribe(env.url, channelOf(name))
    try {
      const held = await env.client.spinLock(name).acquire()
      await held.release()
      assert.equal(await env.raw.command('EXISTS', name), 0)
      // Published after the release, so a message of the release would come first.
      await env.raw.command('PUBLISH', channelOf(name), 'sentinel')
      assert.equal(await sub.next(), 'sentinel', 'the spin release published on the lock channel')
    } finally {
      await sub.close()
    }
  })
})

describe('sharing the RLock hash', () => {
  before(connectOther)

  test('a spin lock and a Lock of the same name exclude each other; a spin waiter takes over after a Lock release', async () => {
    const name = unique('mixed')
    const plain = await env.client.lock(name).acquire()
    assert.equal(await other.spinLock(name).tryAcquire(), null)
    const waiting = other.spinLock(name, { backoff: { kind: 'constant', initial: 10 } }).acquire()
    await plain.release()
    const spin = await within(waiting, 5000, 'the spin waiter to take the lock')
    assert.deepEqual(await env.raw.hgetall(name), { [spin.holder]: '1' })
    assert.equal(await env.client.lock(name).tryAcquire(), null)
    await spin.release()
  })
})

describe('back-off options', () => {
  const bad = [
    [{ backoff: { kind: 'linear', initial: 5 } }, /backoff/],
    [{ backoff: { kind: 'constant', initial: 0 } }, /initial/],
    [{ backoff: { kind: 'constant', initial: NaN } }, /initial/],
    [{ backoff: { kind: 'exponential', initial: 1 } }, /max/],
    [{ backoff: 'fast' }, /backoff/],
    ['fast', /options of spin lock .* must be an object/]
  ]
  for (const [options, pattern] of bad) {
    test(`spinLock(name, ${JSON.stringify(options)}) throws InvalidArgumentError for the lock`, () => {
      const name = unique('badspin')
      const err = (() => {
        try {
          env.client.spinLock(name, options)
        } catch (e) {
          return e
        }
        return assert.fail('accepted bad back-off options')
      })()
      assert.ok(err instanceof InvalidArgumentError, String(err))
      assert.equal(err.code, 'INVALID_ARGUMENT')
      assert.match(err.message, pattern)
      assert.ok(err.message.includes(`'${name}'`), err.message)
      assert.doesNotMatch(err.message, /Constant\(|Exponential \{|ns\)/, 'no Rust Debug form')
      assert.equal(err.lockName, name)
      if (typeof options === 'object') assert.ok(err.message.includes(name), err.message)
    })
  }
})
