// MultiLock and RedLock across 5 real redis-servers: a MultiLock over 3 takes every part or none
// and excludes another MultiLock on the same parts; a RedLock over 5 is held with a majority and
// refused without one; with one server stopped, a RedLock still acquires with the live majority,
// while a MultiLock fails naming the stopped part and holds nothing. Every server is checked with
// its own plain connection.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { channelOf, crosslock, unique, waitUntil, within } from './helpers/util.mjs'

const { MultiLock, RedLock, LockTimeoutError, RedisUnavailableError } = crosslock

/** Short timeouts, so a stopped server is noticed within about a second. */
const OPTIONS = { connectTimeout: 500, responseTimeout: 500 }

const servers = []
const raws = []
/** One client per server, and a second one per server for blockers. */
const clients = []
const blockers = []
const extra = []

before(async () => {
  servers.push(...await Promise.all(Array.from({ length: 5 }, () => startRedis())))
  raws.push(...await Promise.all(servers.map((s) => RawRedis.connect(s.url))))
  clients.push(...await Promise.all(servers.map((s) => crosslock.connect(s.url, OPTIONS))))
  blockers.push(...await Promise.all(servers.map((s) => crosslock.connect(s.url, OPTIONS))))
})

after(async () => {
  for (const c of [...clients, ...blockers, ...extra]) await c.close().catch(() => {})
  for (const r of raws) await r.close().catch(() => {})
  for (const s of servers) await s.stop()
})

/** Whether `key` exists on server `i`. */
const exists = async (i, key) => (await raws[i].command('EXISTS', key)) === 1
/** The part of a multi-lock on server `i`: its own name, so an error can say which one failed. */
const partName = (base, i) => `${base}:s${i}`

describe('MultiLock over 3 servers', () => {
  const SERVERS = [0, 1, 2]

  test('takes every part, as one owner on each server; release frees them all', async () => {
    const base = unique('multi')
    const multi = new MultiLock(SERVERS.map((i) => clients[i].lock(partName(base, i))))
    const held = await multi.acquire()
    assert.deepEqual(held.parts, SERVERS.map((i) => partName(base, i)))
    for (const i of SERVERS) {
      assert.deepEqual(await raws[i].hgetall(partName(base, i)), { [`${clients[i].id}:${held.owner}`]: '1' })
    }
    assert.equal(held.lost, false)
    await held.release()
    for (const i of SERVERS) assert.equal(await exists(i, partName(base, i)), false)
  })

  test('all or none: with one part held elsewhere it takes no part, and waits for it', async () => {
    const base = unique('allornone')
    const blocked = await blockers[1].lock(partName(base, 1)).acquire()
    const multi = new MultiLock(SERVERS.map((i) => clients[i].lock(partName(base, i))))
    assert.equal(await multi.tryAcquire(), null)
    assert.equal(await multi.tryAcquire({ wait: 200 }), null)
    const err = await multi.acquire({ wait: 300 }).then(() => assert.fail('acquired'), (e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
    for (const i of [0, 2]) assert.equal(await exists(i, partName(base, i)), false, `part ${i} left held after a failed acquire`)
    assert.deepEqual(await raws[1].hgetall(partName(base, 1)), { [blocked.holder]: '1' })
    for (const i of SERVERS) assert.equal(clients[i].watchedLocks(), 0)

    const waiting = multi.acquire()
    await waitUntil(async () => (await raws[1].numsub(channelOf(partName(base, 1)))) === 1, 'the multi-lock to wait for the blocked part')
    await blocked.release()
    const held = await within(waiting, 10_000, 'the multi-lock to take every part after the release')
    for (const i of SERVERS) {
      assert.deepEqual(await raws[i].hgetall(partName(base, i)), { [`${clients[i].id}:${held.owner}`]: '1' })
    }
    await held.release()
    for (const i of SERVERS) assert.equal(await exists(i, partName(base, i)), false)
  })

  test('4 tasks, each with its own 3 clients, keep a non-atomic GET/SET counter exact', async () => {
    const base = unique('multicount')
    const key = `${base}:value`
    const sets = await Promise.all(Array.from({ length: 4 }, () =>
      Promise.all(SERVERS.map((i) => crosslock.connect(servers[i].url, OPTIONS)))))
    extra.push(...sets.flat())
    let inside = 0
    let maxInside = 0
    const task = async (own) => {
      const multi = new MultiLock(SERVERS.map((i) => own[i].lock(partName(base, i))))
      for (let round = 0; round < 5; round++) {
        const held = await multi.acquire()
        try {
          maxInside = Math.max(maxInside, ++inside)
          const n = Number((await raws[0].command('GET', key)) ?? 0)
          await sleep(1)
          await raws[0].command('SET', key, n + 1)
          inside--
        } finally {
          await held.release()
        }
      }
    }
    await within(Promise.all(sets.map(task)), 60_000, '4 contending multi-lock tasks')
    assert.equal(maxInside, 1)
    assert.equal(Number(await raws[0].command('GET', key)), 20)
    for (const i of SERVERS) assert.equal(await exists(i, partName(base, i)), false)
  })
})

describe('RedLock over 5 servers', () => {
  const ALL = [0, 1, 2, 3, 4]

  test('held on every server when all are free', async () => {
    const name = unique('red')
    const red = new RedLock(ALL.map((i) => clients[i].lock(name)))
    const held = await red.acquire({ wait: 2000 })
    assert.equal(held.parts.length, 5)
    for (const i of ALL) assert.deepEqual(await raws[i].hgetall(name), { [`${clients[i].id}:${held.owner}`]: '1' })
    await held.release()
    for (const i of ALL) assert.equal(await exists(i, name), false)
  })

  test('held with a majority of 3 while 2 servers are held elsewhere; its release leaves theirs alone', async () => {
    const name = unique('red-majority')
    const others = await Promise.all([0, 1].map((i) => blockers[i].lock(name).acquire()))
    const red = new RedLock(ALL.map((i) => clients[i].lock(name)))
    const held = await red.acquire({ wait: 2000 })
    assert.equal(held.parts.length, 3)
    for (const i of [2, 3, 4]) assert.deepEqual(await raws[i].hgetall(name), { [`${clients[i].id}:${held.owner}`]: '1' })
    await held.release()
    for (const i of [2, 3, 4]) assert.equal(await exists(i, name), false)
    for (const [i, b] of others.entries()) assert.deepEqual(await raws[i].hgetall(name), { [b.holder]: '1' })
    for (const b of others) await b.release()
  })

  test('with a lost minority it is not lost and its release succeeds; with a lost majority the release rejects', async () => {
    const name = unique('red-lost')
    const red = new RedLock(ALL.map((i) => clients[i].lock(name)))
    let held = await red.acquire({ wait: 2000 })
    for (const i of [0, 1]) await raws[i].command('DEL', name) // lost, as far as the holder will find out
    assert.equal(held.lost, false)
    await held.release()
    for (const i of ALL) assert.equal(await exists(i, name), false)
    held = await red.acquire({ wait: 2000 })
    for (const i of [0, 1, 2]) await raws[i].command('DEL', name)
    await assert.rejects(held.release(), (e) => e.code === 'LOCK_LOST')
    for (const i of ALL) assert.equal(await exists(i, name), false)
  })

  test('refused without a majority (3 of 5 held elsewhere), holding nothing', async () => {
    const name = unique('red-minority')
    const others = await Promise.all([0, 1, 2].map((i) => blockers[i].lock(name).acquire()))
    const red = new RedLock(ALL.map((i) => clients[i].lock(name)))
    assert.equal(await red.tryAcquire(), null)
    await assert.rejects(red.acquire({ wait: 300 }), LockTimeoutError)
    for (const i of [3, 4]) assert.equal(await exists(i, name), false, `server ${i} left held without a majority`)
    for (const i of ALL) assert.equal(clients[i].watchedLocks(), 0)
    for (const b of others) await b.release()
  })
})

describe('one server stopped', () => {
  const LIVE = [0, 1, 2, 3]
  const STOPPED = 4

  before(async () => {
    await raws[STOPPED].close()
    await servers[STOPPED].stop()
    // Let the client of the stopped server find out (a single lock on it is refused), so that the
    // tests below see a server known to be down rather than one still being timed out.
    await assert.rejects(clients[STOPPED].lock(unique('probe')).acquire(), RedisUnavailableError)
  })

  test('a RedLock over the 5 servers acquires with the 4 live ones', async () => {
    const name = unique('red-down')
    const red = new RedLock([0, 1, 2, 3, 4].map((i) => clients[i].lock(name)))
    for (const options of [{ wait: 3000 }, undefined]) {
      const held = await within(red.acquire(options), 10_000, 'the red lock to acquire with the live majority')
      assert.equal(held.parts.length, 4)
      for (const i of LIVE) assert.deepEqual(await raws[i].hgetall(name), { [`${clients[i].id}:${held.owner}`]: '1' })
      assert.equal(await blockers[0].lock(name).tryAcquire(), null)
      await held.release() // the part on the stopped server was never taken: it is not asked
      for (const i of LIVE) assert.equal(await exists(i, name), false, `the live part on server ${i} was not released`)
    }
  })


  test('a MultiLock including the stopped server fails naming that part, and holds nothing', async () => {
    const base = unique('multi-down')
    const parts = [2, 3, STOPPED]
    const multi = new MultiLock(parts.map((i) => clients[i].lock(partName(base, i))))
    // Without a wait limit too: it must end, not retry forever.
    for (const attempt of [() => multi.acquire({ wait: 1000 }), () => multi.tryAcquire(), () => multi.acquire()]) {
      const err = await within(attempt(), 10_000, 'the multi-lock to fail').then(() => assert.fail('acquired with a server down'), (e) => e)
      assert.ok(err instanceof RedisUnavailableError, String(err))
      assert.equal(err.code, 'UNAVAILABLE')
      assert.equal(err.lockName, partName(base, STOPPED))
      assert.ok(err.message.includes(`'${partName(base, STOPPED)}'`), err.message)
      for (const i of [2, 3]) assert.equal(await exists(i, partName(base, i)), false, `part on server ${i} left held`)
      for (const i of [2, 3]) assert.equal(clients[i].watchedLocks(), 0)
    }
  })
})

describe('an aborted acquire', () => {
  test('gives back the parts it had taken', async () => {
    const base = unique('multi-abort')
    const busy = await blockers[1].lock(partName(base, 1)).acquire()
    const multi = new MultiLock([0, 1].map((i) => clients[i].lock(partName(base, i))))
    const controller = new AbortController()
    const pending = multi.acquire({ signal: controller.signal })
    await waitUntil(() => exists(0, partName(base, 0)), 'the first part to be taken')
    controller.abort()
    await assert.rejects(pending, (e) => e.name === 'AbortError' || e.code === 'CANCELLED')
    await waitUntil(async () => !(await exists(0, partName(base, 0))), 'the part taken to be given back')
    assert.equal(clients[0].watchedLocks(), 0)
    await busy.release()
  })
})

describe('a MultiLock of many parts', () => {
  test('takes 20,000 parts at once and releases them together; with the last one busy it keeps none', async () => {
    const base = unique('bulk')
    const n = 20_000
    const multi = new MultiLock(Array.from({ length: n }, (_, i) => clients[0].lock(`${base}:${i}`)))
    const count = async () => raws[0].command('EVAL', `return #redis.call('keys', '${base}:*')`, '0')
    const held = await multi.acquire({ wait: 60_000 })
    assert.equal(held.parts.length, n)
    assert.equal(await count(), n)
    assert.equal(clients[0].watchedLocks(), n)
    await held.release()
    assert.equal(await count(), 0)
    assert.equal(clients[0].watchedLocks(), 0)

    const busy = await blockers[0].lock(`${base}:${n - 1}`).acquire()
    assert.equal(await multi.tryAcquire(), null)
    assert.equal(await count(), 1)
    assert.deepEqual(await raws[0].hgetall(`${base}:${n - 1}`), { [busy.holder]: '1' })
    assert.equal(clients[0].watchedLocks(), 0)
    await busy.release()
  })
})

describe('extend of a multi-lock', () => {
  test('sets every part; a force-unlocked part makes the extend reject LockLostError naming it', async () => {
    const base = unique('multi-extend')
    const multi = new MultiLock([0, 1, 2].map((i) => clients[i].lock(partName(base, i))))
    const held = await multi.acquire({ lease: 300 })
    await held.extend(5000)
    assert.ok(held.validity > 4000 && held.validity <= 5000, `validity ${held.validity}`)
    for (const i of [0, 1, 2]) assert.ok((await raws[i].command('PTTL', partName(base, i))) > 3000)
    await sleep(450) // past the first lease
    assert.equal(held.lost, false)
    assert.equal(await blockers[1].lock(partName(base, 1)).tryAcquire(), null)
    assert.equal(await blockers[2].lock(partName(base, 2)).forceUnlock(), true)
    const err = await held.extend(5000).then(() => null, (e) => e)
    assert.ok(err instanceof crosslock.LockLostError, String(err))
    assert.equal(err.lockName, partName(base, 2))
    assert.equal(held.lost, true)
    await assert.rejects(held.release(), crosslock.LockLostError)
  })
})
