// NonReentrantLock: its holder asking again is refused at once with NonReentrantError naming the
// lock and the holder (never a wait for itself, whatever the wait limit), Redis unchanged; other
// owners wait for it as for any lock; it shares the RLock hash with Lock.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'

import { channelOf, crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { NonReentrantError, newOwner, runAsOwner } = crosslock

const env = useRedis()

let other
const connectOther = async () => { other ??= await env.connect() }

/** Asserts `promise` is refused at once (within a 5 s watchdog) with NonReentrantError. */
async function refused (promise, name, holder) {
  const err = await within(promise, 5000, 'the re-acquire to be refused (it must never wait for itself)')
    .then((held) => assert.fail(`re-entered a non-reentrant lock: ${held}`), (e) => e)
  assert.ok(err instanceof NonReentrantError, String(err))
  assert.equal(err.code, 'NON_REENTRANT')
  assert.equal(err.lockName, name)
  assert.ok(err.message.includes(`'${name}'`), err.message)
  assert.ok(err.message.includes(holder), `the message names the holder ${holder}: ${err.message}`)
  return err
}

describe('re-acquire by the holder', () => {
  before(connectOther)

  test('inside withLock: acquire, tryAcquire, a long wait and a nested withLock are all refused; Redis unchanged', async () => {
    const name = unique('nr')
    const lock = env.client.nonReentrantLock(name)
    let ranNested = false
    await lock.withLock(async (outer) => {
      await refused(lock.acquire(), name, outer.holder)
      await refused(lock.tryAcquire(), name, outer.holder)
      await refused(lock.acquire({ wait: 60_000 }), name, outer.holder)
      await refused(lock.withLock(async () => { ranNested = true }), name, outer.holder)
      assert.equal(ranNested, false)
      assert.deepEqual(await env.raw.hgetall(name), { [outer.holder]: '1' }, 'a refused re-acquire changed Redis')
      assert.equal(await lock.holdCount(), 1)
      assert.equal(outer.lost, false)
      assert.equal(await other.nonReentrantLock(name).tryAcquire(), null)
    })
    // The single hold was released once, fully.
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('with an explicit owner outside any scope, and inside runAsOwner, the same', async () => {
    const name = unique('nr-owner')
    const lock = env.client.nonReentrantLock(name)
    const owner = newOwner()
    const held = await lock.acquire({ owner })
    await refused(lock.acquire({ owner }), name, held.holder)
    await refused(lock.tryAcquire({ owner, wait: 60_000 }), name, held.holder)
    assert.deepEqual(await env.raw.hgetall(name), { [held.holder]: '1' })
    await held.release()
    assert.equal(await env.raw.command('EXISTS', name), 0)

    await runAsOwner(async () => {
      const first = await lock.acquire()
      await refused(lock.acquire(), name, first.holder)
      await lock.release()
    })
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })
})

describe('other owners', () => {
  before(connectOther)

  test('another owner of the same client is not refused: it waits, and is woken by the release', async () => {
    const name = unique('nr-wait')
    const lock = env.client.nonReentrantLock(name)
    const held = await lock.acquire()
    assert.equal(await lock.tryAcquire(), null, 'another owner is simply busy, not refused')
    const waiting = lock.acquire()
    await waitUntil(async () => (await env.raw.numsub(channelOf(name))) === 1, 'the second owner to wait')
    await held.release()
    const next = await within(waiting, 5000, 'the waiting owner to be woken')
    assert.notEqual(next.owner, held.owner)
    assert.deepEqual(await env.raw.hgetall(name), { [next.holder]: '1' })
    await next.release()
  })

  test('a NonReentrantLock and a Lock of the same name exclude each other', async () => {
    const name = unique('nr-mixed')
    const plain = await env.client.lock(name).acquire()
    assert.equal(await other.nonReentrantLock(name).tryAcquire(), null)
    const waiting = other.nonReentrantLock(name).acquire()
    await waitUntil(async () => (await env.raw.numsub(channelOf(name))) === 1, 'the non-reentrant waiter to wait')
    await plain.release()
    const nr = await within(waiting, 5000, 'the non-reentrant waiter to be woken by the Lock release')
    assert.equal(await env.client.lock(name).tryAcquire(), null)
    await nr.release()
  })
})
