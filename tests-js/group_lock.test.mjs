// GroupLock (Redisson's getMultiLock(group, values)): a set of values taken all or none, overlapping
// sets excluding each other and disjoint ones not, re-entry inside withLock, a release waking a
// waiter, the lost signal, and clear errors for bad values.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { background, channelOf, crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { InvalidArgumentError, WrongTypeError, newOwner } = crosslock

const env = useRedis()

describe('GroupLock', () => {
  test('a set is written as Redisson writes it and released whole', async () => {
    const group = unique('orders')
    const lock = env.client.groupLock(group, ['42', 'héllo'])
    assert.equal(lock.name, group)
    assert.equal(lock.fields.length, 2)
    const held = await lock.acquire()
    const fields = await env.raw.hgetall(group)
    assert.equal(Object.keys(fields).length, 6)
    for (const f of lock.fields) {
      assert.equal(fields[f], held.holder)
      assert.equal(fields[`${f}:${held.holder}:lock_count`], '1')
    }
    await held.release()
    assert.equal(await env.raw.command('EXISTS', group), 0)
  })

  test('overlapping sets exclude each other, disjoint ones do not', async () => {
    const group = unique('g')
    const held = await env.client.groupLock(group, ['a', 'b']).acquire()
    assert.equal(await env.client.groupLock(group, ['b', 'c']).tryAcquire(), null)
    const disjoint = await env.client.groupLock(group, ['c', 'd']).tryAcquire()
    assert.ok(disjoint, 'a disjoint set of the group is free')
    await disjoint.release()
    await held.release()
  })

  test('re-entry inside withLock counts, and the last release wakes a waiter', async () => {
    const group = unique('re')
    const lock = env.client.groupLock(group, ['x'])
    const waiter = { state: null }
    await lock.withLock(async () => {
      await lock.withLock(async () => {
        assert.equal(await lock.holdCount(), 2)
      })
      // Another owner (inside withLock this chain is the holder, and would re-enter).
      waiter.state = background(env.client.groupLock(group, ['x', 'y']), { wait: 20_000, owner: newOwner() })
      await waitUntil(async () => (await env.raw.command('PUBSUB', 'NUMSUB', channelOf(group)))[1] >= 1, 'the waiter to subscribe')
      assert.equal(waiter.state.done, false)
    })
    await within(waiter.state.promise, 20_000, 'the waiter to be woken')
    assert.ok(waiter.state.held, String(waiter.state.error))
    await waiter.state.held.release()
  })

  test('a force-unlock of one value aborts the holder signal', async () => {
    const fast = await env.connect({ watchdogTimeout: 600 })
    const group = unique('lost')
    const held = await fast.groupLock(group, ['m', 'n']).acquire({ owner: newOwner() })
    assert.equal(await fast.groupLock(group, ['n']).forceUnlock(), true)
    await within(new Promise((resolve) => {
      if (held.signal.aborted) resolve()
      held.signal.addEventListener('abort', resolve)
    }), 10_000, 'the lost signal')
    assert.equal(held.lost, true)
  })

  test('bad values and another kind at the name are refused clearly', async () => {
    assert.throws(() => env.client.groupLock('g', []), (e) => e instanceof InvalidArgumentError && /at least one value/.test(e.message))
    assert.throws(() => env.client.groupLock('g', ['a', 'a']), (e) => e instanceof InvalidArgumentError && /"a" is given twice/.test(e.message))
    assert.throws(() => env.client.groupLock('g', 'abc'), (e) => e instanceof TypeError && /\['abc'\]/.test(e.message))
    assert.throws(() => env.client.groupLock('g', ['a', 7]), (e) => e instanceof TypeError && /must be strings/.test(e.message))
    assert.throws(() => env.client.groupLock('g', ['a'], { codec: 'json' }), (e) => e instanceof InvalidArgumentError && /kryo5/.test(e.message))
    const name = unique('taken')
    const held = await env.client.lock(name).acquire()
    const before = await env.raw.hgetall(name)
    await assert.rejects(env.client.groupLock(name, ['a']).tryAcquire(), (e) => e instanceof WrongTypeError && /another kind/.test(e.message))
    assert.deepEqual(await env.raw.hgetall(name), before)
    await held.release()
  })
})
