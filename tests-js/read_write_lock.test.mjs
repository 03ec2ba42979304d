// ReadWriteLock: readers on separate clients hold it at once, a writer waits for every reader and
// excludes readers and writers, a write release wakes every waiting reader, an upgrade is refused
// at once with a clear error, and a writer may downgrade. Redis is read with a plain connection:
// Redisson's hash (`mode`, one field per reader, `<holder>:write` for the writer), the per-hold
// timeout keys, and the channel redisson_rwlock:{name}.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'

import { Subscriber } from './helpers/resp.mjs'
import { crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { UpgradeRefusedError, newOwner } = crosslock

const env = useRedis()

const rwChannel = (name) => `redisson_rwlock:{${name}}`
const readTimeoutKey = (name, holder, k) => `{${name}}:${holder}:rwlock_timeout:${k}`

let clients
const connectClients = async () => {
  clients ??= await Promise.all(Array.from({ length: 4 }, () => env.connect()))
}

describe('readers and writers', () => {
  before(connectClients)

  test('readers on 3 clients hold the read lock at the same time, each with its own field and timeout key', async () => {
    const name = unique('readers')
    const holds = []
    for (const client of clients.slice(0, 3)) {
      const held = await client.readWriteLock(name).readLock().tryAcquire()
      assert.ok(held, 'a reader was refused while only readers held the lock')
      holds.push(held)
    }
    const expected = { mode: 'read' }
    for (const held of holds) expected[held.holder] = '1'
    assert.deepEqual(await env.raw.hgetall(name), expected)
    for (const held of holds) assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, held.holder, 1)), 1)
    assert.equal(await clients[3].readWriteLock(name).writeLock().tryAcquire(), null, 'a writer got in beside readers')
    for (const held of holds) await held.release()
    assert.equal(await env.raw.command('EXISTS', name), 0)
    for (const held of holds) assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, held.holder, 1)), 0)
  })

  test('a waiting writer gets the lock only once the last reader has released', async () => {
    const name = unique('writerwaits')
    const r1 = await clients[0].readWriteLock(name).readLock().acquire()
    const r2 = await clients[1].readWriteLock(name).readLock().acquire()
    const writing = clients[2].readWriteLock(name).writeLock().acquire()
    await waitUntil(async () => (await env.raw.numsub(rwChannel(name))) === 1, 'the writer to wait on redisson_rwlock:{name}')
    await r1.release()
    // One reader left: still no writer, and no other writer can get in either.
    assert.equal(await clients[3].readWriteLock(name).writeLock().tryAcquire(), null)
    assert.deepEqual(await env.raw.hgetall(name), { mode: 'read', [r2.holder]: '1' })
    await r2.release()
    const w = await within(writing, 5000, 'the writer to be woken by the last read release')
    assert.match(w.holder, /:write$/)
    assert.deepEqual(await env.raw.hgetall(name), { mode: 'write', [w.holder]: '1' })
    await w.release()
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('a writer excludes readers and writers; its release publishes 1 and wakes every waiting reader', async () => {
    const name = unique('wakeall')
    const w = await env.client.readWriteLock(name).writeLock().acquire()
    assert.equal(await clients[3].readWriteLock(name).writeLock().tryAcquire(), null)
    assert.equal(await clients[3].readWriteLock(name).readLock().tryAcquire(), null)
    const readers = clients.slice(0, 3).map((c) => c.readWriteLock(name).readLock().acquire())
    await waitUntil(async () => (await env.raw.numsub(rwChannel(name))) === 3, 'the 3 readers to wait')
    const sub = await Subscriber.subscribe(env.url, rwChannel(name))
    try {
      assert.deepEqual(await env.raw.hgetall(name), { mode: 'write', [w.holder]: '1' })
      await w.release()
      assert.equal(await sub.next(), '1')
    } finally {
      await sub.close()
    }
    const holds = await within(Promise.all(readers), 5000, 'every waiting reader to be woken by one write release')
    const expected = { mode: 'read' }
    for (const held of holds) expected[held.holder] = '1'
    assert.deepEqual(await env.raw.hgetall(name), expected, 'the woken readers hold the lock together')
    for (const held of holds) await held.release()
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })
})

describe('upgrade and downgrade', () => {
  before(connectClients)

  test('a reader asking for the write lock is refused at once with UpgradeRefusedError naming the lock', async () => {
    const name = unique('upgrade')
    const rw = env.client.readWriteLock(name)
    await rw.readLock().withLock(async (read) => {
      for (const attempt of [() => rw.writeLock().acquire(), () => rw.writeLock().tryAcquire({ wait: 60_000 })]) {
        const err = await within(attempt(), 5000, 'the upgrade to be refused (it must never wait for itself)')
          .then(() => assert.fail('upgraded a read hold to a write hold'), (e) => e)
        assert.ok(err instanceof UpgradeRefusedError, String(err))
        assert.equal(err.code, 'UPGRADE_REFUSED')
        assert.equal(err.lockName, name)
        assert.ok(err.message.includes(`'${name}'`), err.message)
        assert.match(err.message, /read lock/)
      }
      assert.deepEqual(await env.raw.hgetall(name), { mode: 'read', [read.holder]: '1' }, 'Redis unchanged')
      assert.equal(read.lost, false)
    })
    assert.equal(await env.raw.command('EXISTS', name), 0)
    // Released first, the write lock is free for the same owner.
    const w = await rw.writeLock().acquire({ wait: 1000 })
    await w.release()
  })

  test('the same refusal with an explicit owner outside any scope', async () => {
    const name = unique('upgrade-owner')
    const rw = env.client.readWriteLock(name)
    const owner = newOwner()
    const read = await rw.readLock().acquire({ owner })
    const err = await within(rw.writeLock().acquire({ owner }), 5000, 'the upgrade to be refused')
      .then(() => assert.fail('upgraded'), (e) => e)
    assert.ok(err instanceof UpgradeRefusedError, String(err))
    assert.deepEqual(await env.raw.hgetall(name), { mode: 'read', [read.holder]: '1' })
    await read.release()
  })

  test('the writer may take the read lock and release the write lock first, leaving a read hold', async () => {
    const name = unique('downgrade')
    const rw = env.client.readWriteLock(name)
    const owner = newOwner()
    const w = await rw.writeLock().acquire({ owner })
    const r = await within(rw.readLock().acquire({ owner }), 5000, 'the writer to take the read lock')
    assert.deepEqual(await env.raw.hgetall(name), { mode: 'write', [w.holder]: '1', [r.holder]: '1' })
    assert.equal(await clients[0].readWriteLock(name).readLock().tryAcquire(), null, 'another reader got in beside the writer')
    await w.release()
    assert.deepEqual(await env.raw.hgetall(name), { mode: 'read', [r.holder]: '1' })
    const other = await clients[0].readWriteLock(name).readLock().tryAcquire()
    assert.ok(other, 'after the downgrade other readers may join')
    assert.equal(await clients[1].readWriteLock(name).writeLock().tryAcquire(), null, 'a writer got in beside readers')
    await other.release()
    await r.release()
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('a read-write lock refuses the name of a plain lock with WrongTypeError, changing nothing', async () => {
    const name = unique('mix')
    const held = await env.client.lock(name).acquire()
    await assert.rejects(clients[0].readWriteLock(name).readLock().tryAcquire(), { code: 'WRONG_TYPE', lockName: name })
    await assert.rejects(clients[0].readWriteLock(name).writeLock().tryAcquire(), { code: 'WRONG_TYPE', lockName: name })
    assert.deepEqual(await env.raw.hgetall(name), { [held.holder]: '1' })
    await held.release()
  })
})
