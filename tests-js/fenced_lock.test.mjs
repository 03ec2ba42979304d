// FencedLock: every acquisition, by any client, gets a bigint token strictly greater than every
// token before it; re-entries take a new one; the counter (redisson_lock_token:{name}, read with a
// plain connection) outlives the lock and continues from whatever another process left there;
// and a holder whose lease ran out holds a token a fencing resource can refuse.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { before, describe, test } from 'node:test'

import { crosslock, unique, useRedis, within } from './helpers/util.mjs'

const { LockLostError } = crosslock

const env = useRedis()

const tokenKey = (name) => `redisson_lock_token:{${name}}`

let clients
const connectClients = async () => {
  clients ??= await Promise.all(Array.from({ length: 8 }, () => env.connect()))
}

/** A resource protected by fencing: it refuses a write whose token is older than the newest seen. */
class FencedStore {
  newest = -1n
  writes = []
  write (token, value) {
    if (token < this.newest) return false
    this.newest = token
    this.writes.push(value)
    return true
  }
}

describe('fencing tokens', () => {
  before(connectClients)

  test('8 clients contending: tokens strictly increase in the order the lock was held', async () => {
    const name = unique('fenced')
    const tokens = []
    const task = async (client) => {
      const lock = client.fencedLock(name)
      for (let i = 0; i < 5; i++) {
        const held = await lock.acquire()
        try {
          assert.equal(typeof held.token, 'bigint')
          tokens.push(held.token)
        } finally {
          await held.release()
        }
      }
    }
    await within(Promise.all(clients.map(task)), 30_000, '8 contending clients')
    assert.equal(tokens.length, 40)
    for (let i = 1; i < tokens.length; i++) {
      assert.ok(tokens[i] > tokens[i - 1], `token ${tokens[i]} handed out after ${tokens[i - 1]}`)
    }
    assert.equal(await env.raw.command('GET', tokenKey(name)), String(tokens.at(-1)))
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('a re-entry takes a new, greater token; the counter outlives the lock, without expiry', async () => {
    const name = unique('reenter')
    const lock = env.client.fencedLock(name)
    let last
    await lock.withLock(async (outer) => {
      const inner = await lock.acquire()
      assert.ok(inner.token > outer.token, `re-entry token ${inner.token} ≤ outer ${outer.token}`)
      assert.deepEqual(await env.raw.hgetall(name), { [outer.holder]: '2' })
      last = inner.token
      await inner.release()
    })
    assert.equal(await env.raw.command('EXISTS', name), 0)
    assert.equal(await env.raw.command('GET', tokenKey(name)), String(last))
    assert.equal(await env.raw.command('PTTL', tokenKey(name)), -1)
    const again = await clients[0].fencedLock(name).acquire()
    assert.ok(again.token > last, `token ${again.token} after the lock was freed ≤ ${last}`)
    await again.release()
  })

  test('tokens continue from a counter another process left in Redis', async () => {
    const name = unique('continue')
    await env.raw.command('SET', tokenKey(name), '1000')
    const held = await env.client.fencedLock(name).acquire()
    assert.equal(held.token, 1001n)
    assert.equal(await env.raw.command('GET', tokenKey(name)), '1001')
    await held.release()
  })

  test('a holder whose lease ran out is told so, and its stale token is refused by a fencing resource', async () => {
    const name = unique('stale')
    const store = new FencedStore()
    const stale = await env.client.fencedLock(name).acquire({ lease: 300 })
    assert.equal(store.write(stale.token, 'first holder, on time'), true)
    // The next holder is woken when the lease runs out; nobody released.
    const fresh = await within(clients[0].fencedLock(name).acquire(), 5000, 'the next holder after the lease expired')
    assert.ok(fresh.token > stale.token)
    assert.equal(store.write(fresh.token, 'second holder'), true)
    if (!stale.lost) await within(once(stale.signal, 'abort'), 5000, "the stale holder's signal to abort")
    assert.ok(stale.signal.reason instanceof LockLostError, String(stale.signal.reason))
    assert.equal(store.write(stale.token, 'first holder, too late'), false)
    assert.deepEqual(store.writes, ['first holder, on time', 'second holder'])
    await assert.rejects(stale.release(), LockLostError)
    assert.deepEqual(await env.raw.hgetall(name), { [fresh.holder]: '1' }, "the stale release touched the new holder's lock")
    await fresh.release()
  })

  test('a fenced lock excludes a plain Lock of the same name; only fenced acquisitions take tokens', async () => {
    const name = unique('mixed')
    const plain = await env.client.lock(name).acquire()
    assert.equal(await clients[0].fencedLock(name).tryAcquire(), null)
    assert.equal(await env.raw.command('EXISTS', tokenKey(name)), 0, 'a refused try took a token')
    await plain.release()
    const fenced = await clients[0].fencedLock(name).acquire()
    assert.equal(await env.client.lock(name).tryAcquire(), null)
    await fenced.release()
  })
})
