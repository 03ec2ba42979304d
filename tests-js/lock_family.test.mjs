// One conformance suite for every lock of the RLock family, parametrized over LOCK_FAMILY: the
// Redisson layout, exclusion across 8 clients, reentrancy (or the NonReentrantLock's refusal),
// wait limits, the watchdog, the lost-lock signal after a forceUnlock, and AbortSignal
// cancellation of a waiter that leaves nothing behind. Every check of Redis goes through a plain
// connection (helpers/resp.mjs), never through crosslock.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import net from 'node:net'
import { before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { channelOf, crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { LockTimeoutError, LockLostError, NonReentrantError, newOwner } = crosslock

const env = useRedis()

const rwChannel = (name) => `redisson_rwlock:{${name}}`
/** A spin lock that retries every 5 ms, so 8 contending clients finish quickly. */
const FAST_SPIN = { backoff: { kind: 'constant', initial: 5 } }

/**
 * Every lock type of the family. `make(client, name)` builds the lock under test; `rival(client,
 * name)` the lock it must exclude (itself, or the writer for a read lock); `hash(held, n)` the
 * lock hash Redisson stores for `n` holds of `held`; `channel(name, holder)` the channel a waiter
 * of this kind listens on (none for a spin lock).
 */
const plainHash = (held, n) => ({ [held.holder]: String(n) })
const LOCK_FAMILY = [
  {
    kind: 'Lock',
    cls: 'Lock',
    make: (c, name) => c.lock(name),
    hash: plainHash,
    channel: (name) => channelOf(name)
  },
  {
    kind: 'FairLock',
    cls: 'FairLock',
    make: (c, name) => c.fairLock(name),
    hash: plainHash,
    channel: (name, holder) => `${channelOf(name)}:${holder}`,
    fair: true
  },
  {
    kind: 'ReadWriteLock.writeLock',
    cls: 'WriteLock',
    make: (c, name) => c.readWriteLock(name).writeLock(),
    hash: (held, n) => ({ mode: 'write', [held.holder]: String(n) }),
    channel: (name) => rwChannel(name)
  },
  {
    kind: 'ReadWriteLock.readLock',
    cls: 'ReadLock',
    make: (c, name) => c.readWriteLock(name).readLock(),
    rival: (c, name) => c.readWriteLock(name).writeLock(),
    hash: (held, n) => ({ mode: 'read', [held.holder]: String(n) }),
    channel: (name) => rwChannel(name),
    read: true
  },
  {
    kind: 'SpinLock',
    cls: 'SpinLock',
    make: (c, name) => c.spinLock(name, FAST_SPIN),
    hash: plainHash,
    channel: (name) => channelOf(name),
    spin: true
  },
  {
    kind: 'FencedLock',
    cls: 'FencedLock',
    make: (c, name) => c.fencedLock(name),
    hash: plainHash,
    channel: (name) => channelOf(name),
    fenced: true
  },
  {
    kind: 'NonReentrantLock',
    cls: 'NonReentrantLock',
    make: (c, name) => c.nonReentrantLock(name),
    hash: plainHash,
    channel: (name) => channelOf(name),
    nonReentrant: true
  },
  {
    kind: 'NonReentrantFairLock',
    cls: 'NonReentrantFairLock',
    make: (c, name) => c.nonReentrantFairLock(name),
    hash: plainHash,
    channel: (name, holder) => `${channelOf(name)}:${holder}`,
    fair: true,
    nonReentrant: true
  }
]

/** The read-hold timeout key of hold `k` of `holder` (a read lock's per-hold lease). */
const readTimeoutKey = (name, holder, k) => `{${name}}:${holder}:rwlock_timeout:${k}`

/** Every channel with a subscriber whose name mentions the lock. */
async function channelsAbout (name) {
  return env.raw.command('PUBSUB', 'CHANNELS', `*{${name}}*`)
}

/**
 * A MONITOR connection counting the scripts run on `name` (a spin lock waiter's attempts, which
 * leave no other trace): `count()`, `close()`.
 */
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

describe('lock family conformance', { concurrency: true }, () => {
  for (const kind of LOCK_FAMILY) {
    const rival = kind.rival ?? kind.make
    describe(kind.kind, { concurrency: 1 }, () => {
      /** 8 clients for the contention test, one with a 600 ms watchdog, two spare. */
      let clients, watched, other, third
      before(async () => {
        clients = await Promise.all(Array.from({ length: 8 }, () => env.connect()))
        watched = await env.connect({ watchdogTimeout: 600 })
        other = await env.connect()
        third = await env.connect()
      })

      /** Resolves once the waiter (holder string `holder`) is registered as waiting on `name`. */
      async function whileWaiting (name, holder, monitor) {
        if (kind.spin) {
          await waitUntil(() => monitor.count() >= 2, 'the spin waiter to retry')
        } else if (kind.fair) {
          await waitUntil(async () => {
            const queue = await env.raw.command('LRANGE', `redisson_lock_queue:{${name}}`, 0, -1)
            return queue.length === 1 && queue[0] === holder &&
              (await env.raw.numsub(kind.channel(name, holder))) === 1
          }, 'the fair waiter to queue and subscribe')
        } else {
          await waitUntil(async () => (await env.raw.numsub(kind.channel(name, holder))) === 1, 'the waiter to subscribe')
        }
      }

      test(`${kind.kind}: acquire writes Redisson's layout with the watchdog lease; release deletes it`, async () => {
        const name = unique(kind.cls)
        const lock = kind.make(env.client, name)
        assert.ok(lock instanceof crosslock[kind.cls], `${kind.kind} should be a ${kind.cls}`)
        assert.equal(lock.name, name)
        const held = await lock.acquire()
        assert.match(held.holder, new RegExp(`^${env.client.id}:${held.owner}${kind.cls === 'WriteLock' ? ':write' : ''}$`))
        assert.equal(await env.raw.command('TYPE', name), 'hash')
        assert.deepEqual(await env.raw.hgetall(name), kind.hash(held, 1))
        const pttl = await env.raw.command('PTTL', name)
        assert.ok(pttl > 25_000 && pttl <= 30_000, `PTTL ${pttl} should be the 30 s watchdog lease`)
        if (kind.read) {
          const timeoutPttl = await env.raw.command('PTTL', readTimeoutKey(name, held.holder, 1))
          assert.ok(timeoutPttl > 25_000 && timeoutPttl <= 30_000, `read hold timeout key PTTL ${timeoutPttl}`)
        }
        if (kind.fenced) {
          assert.equal(typeof held.token, 'bigint')
          assert.equal(await env.raw.command('GET', `redisson_lock_token:{${name}}`), String(held.token))
        } else {
          assert.equal(held.token, undefined)
        }
        assert.equal(await lock.isLocked(), true)
        assert.deepEqual(await lock.holders(), [held.holder])
        await held.release()
        assert.equal(await env.raw.command('EXISTS', name), 0)
        if (kind.read) assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, held.holder, 1)), 0)
        assert.equal(await lock.isLocked(), false)
      })

      test(`${kind.kind}: 8 concurrent tasks on 8 clients keep a non-atomic GET/SET counter exact`, async () => {
        const name = unique(`${kind.cls}-counter`)
        const key = `${name}:value`
        const rounds = 10
        let writers = 0
        let readers = 0
        const overlaps = []
        // For a read lock, half the tasks write under the write lock and half read under the
        // read lock: readers may overlap each other, never a writer.
        const task = async (client, index) => {
          const reading = kind.read && index % 2 === 1
          const lock = reading ? kind.make(client, name) : rival(client, name)
          for (let i = 0; i < rounds; i++) {
            const held = await lock.acquire()
            try {
              if (reading) {
                readers++
                if (writers !== 0) overlaps.push(`a reader ran beside ${writers} writer(s)`)
                const before = await env.raw.command('GET', key)
                await sleep(1)
                const after = await env.raw.command('GET', key)
                if (before !== after) overlaps.push(`the counter moved under a read hold: ${before} → ${after}`)
                readers--
              } else {
                writers++
                if (writers !== 1 || readers !== 0) overlaps.push(`${writers} writers and ${readers} readers inside at once`)
                const n = Number((await env.raw.command('GET', key)) ?? 0)
                await sleep(1)
                await env.raw.command('SET', key, n + 1)
                writers--
              }
            } finally {
              await held.release()
            }
          }
        }
        await within(Promise.all(clients.map(task)), 60_000, '8 contending tasks to finish')
        const writingTasks = kind.read ? 4 : 8
        assert.deepEqual(overlaps, [])
        assert.equal(Number(await env.raw.command('GET', key)), writingTasks * rounds)
        assert.equal(await env.raw.command('EXISTS', name), 0, 'every hold released')
      })

      if (kind.nonReentrant) {
        test(`${kind.kind}: a nested acquire by the holder rejects at once with NonReentrantError naming the lock`, async () => {
          const name = unique(kind.cls)
          const lock = kind.make(env.client, name)
          await lock.withLock(async (outer) => {
            const err = await within(lock.acquire(), 5000, 'the re-acquire to be refused (it must never wait for itself)')
              .then(() => assert.fail('re-entered a non-reentrant lock'), (e) => e)
            assert.ok(err instanceof NonReentrantError, String(err))
            assert.equal(err.code, 'NON_REENTRANT')
            assert.equal(err.lockName, name)
            assert.ok(err.message.includes(`'${name}'`), err.message)
            assert.deepEqual(await env.raw.hgetall(name), kind.hash(outer, 1), 'Redis unchanged')
            assert.equal(outer.lost, false)
          })
          assert.equal(await env.raw.command('EXISTS', name), 0)
        })
      } else {
        test(`${kind.kind}: inside withLock a nested acquire re-enters and counts holds in Redis`, async () => {
          const name = unique(kind.cls)
          const lock = kind.make(env.client, name)
          await lock.withLock(async (outer) => {
            const inner = await within(lock.acquire({ wait: 0 }), 5000, 'the nested acquire')
            assert.equal(inner.owner, outer.owner)
            assert.equal(inner.holder, outer.holder)
            assert.equal(await lock.holdCount(), 2)
            assert.deepEqual(await env.raw.hgetall(name), kind.hash(outer, 2))
            if (kind.read) {
              assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, outer.holder, 1)), 1)
              assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, outer.holder, 2)), 1)
            }
            if (kind.fenced) assert.ok(inner.token > outer.token, `re-entry token ${inner.token} ≤ ${outer.token}`)
            assert.equal(await rival(other, name).tryAcquire(), null, 'another client got in during a re-entrant hold')
            await inner.release()
            assert.deepEqual(await env.raw.hgetall(name), kind.hash(outer, 1))
            if (kind.read) assert.equal(await env.raw.command('EXISTS', readTimeoutKey(name, outer.holder, 2)), 0)
            assert.equal(await lock.isHeld(), true)
          })
          assert.equal(await env.raw.command('EXISTS', name), 0)
        })
      }

      test(`${kind.kind}: while another client holds it, tryAcquire resolves null and acquire({ wait }) rejects, taking nothing`, async () => {
        const name = unique(kind.cls)
        const holding = await rival(other, name).acquire()
        const expected = await env.raw.hgetall(name)
        const lock = kind.make(env.client, name)
        assert.equal(await lock.tryAcquire(), null)
        assert.equal(await lock.tryAcquire({ wait: 200 }), null)
        const err = await lock.acquire({ wait: 200 }).then(() => assert.fail('acquired a held lock'), (e) => e)
        assert.ok(err instanceof LockTimeoutError, String(err))
        assert.equal(err.code, 'TIMEOUT')
        assert.equal(err.lockName, name)
        assert.ok(err.message.includes(name), err.message)
        assert.deepEqual(await env.raw.hgetall(name), expected, 'the waiter changed the lock')
        if (kind.fair) {
          assert.equal(await env.raw.command('EXISTS', `redisson_lock_queue:{${name}}`), 0, 'a timed-out waiter stayed queued')
          assert.equal(await env.raw.command('EXISTS', `redisson_lock_timeout:{${name}}`), 0, 'a timed-out waiter kept a deadline')
        }
        await waitUntil(async () => (await channelsAbout(name)).length === 0, 'the timed-out waiters to unsubscribe', 5000)
        await holding.release()
        const mine = await lock.tryAcquire()
        assert.ok(mine, 'the lock was not free after the holder released it')
        await mine.release()
      })

      test(`${kind.kind}: the watchdog keeps the hold past a 600 ms watchdog timeout`, async () => {
        const name = unique(kind.cls)
        const lock = kind.make(watched, name)
        const held = await lock.acquire()
        assert.equal(watched.watchedLocks(), 1)
        await sleep(3 * 600) // three leases: without renewal the hold would be long gone
        assert.equal(held.lost, false)
        assert.deepEqual(await env.raw.hgetall(name), kind.hash(held, 1))
        const pttl = await env.raw.command('PTTL', name)
        assert.ok(pttl > 0 && pttl <= 600, `PTTL ${pttl} should be a renewed 600 ms lease`)
        if (kind.read) {
          const timeoutPttl = await env.raw.command('PTTL', readTimeoutKey(name, held.holder, 1))
          assert.ok(timeoutPttl > 0 && timeoutPttl <= 600, `read hold timeout key PTTL ${timeoutPttl}`)
        }
        assert.equal(await rival(other, name).tryAcquire(), null, 'another client took a renewed lock')
        await held.release()
        assert.equal(watched.watchedLocks(), 0)
        assert.equal(await env.raw.command('EXISTS', name), 0)
      })

      test(`${kind.kind}: another client's forceUnlock aborts held.signal with LockLostError; release rejects`, async () => {
        const name = unique(kind.cls)
        const held = await kind.make(watched, name).acquire()
        const aborted = once(held.signal, 'abort')
        assert.equal(await kind.make(other, name).forceUnlock(), true)
        assert.equal(await env.raw.command('EXISTS', name), 0)
        await within(aborted, 5000, 'held.signal to abort after the forceUnlock')
        assert.equal(held.lost, true)
        const reason = held.signal.reason
        assert.ok(reason instanceof LockLostError, String(reason))
        assert.equal(reason.code, 'LOCK_LOST')
        assert.equal(reason.lockName, name)
        assert.equal(reason.holder, held.holder)
        await assert.rejects(held.release(), LockLostError)
        assert.equal(watched.watchedLocks(), 0)
        const next = await rival(other, name).tryAcquire()
        assert.ok(next, 'the force-unlocked lock is free for another client')
        await next.release()
      })

      test(`${kind.kind}: aborting a waiter rejects with the reason and leaves no hold, no queue entry, no subscription`, async () => {
        const name = unique(kind.cls)
        const holding = await rival(other, name).acquire()
        const expected = await env.raw.hgetall(name)
        const owner = newOwner()
        const waiterHolder = `${third.id}:${owner}`
        const monitor = kind.spin ? await monitorScriptsOn(env.url, name) : null
        try {
          const controller = new AbortController()
          const waiting = kind.make(third, name).acquire({ owner, signal: controller.signal })
          await whileWaiting(name, waiterHolder, monitor)
          const reason = new Error('the user gave up')
          controller.abort(reason)
          await assert.rejects(within(waiting, 5000, 'the aborted acquire to reject'), (e) => e === reason)
        } finally {
          monitor?.close()
        }
        await waitUntil(async () => (await env.raw.numsub(kind.channel(name, waiterHolder))) === 0 &&
          (await channelsAbout(name)).length === 0, 'PUBSUB NUMSUB of the waiter channel to be 0', 5000)
        assert.equal(third.subscribedChannels(), 0)
        if (kind.fair) {
          assert.equal(await env.raw.command('EXISTS', `redisson_lock_queue:{${name}}`), 0, 'the cancelled waiter is still queued')
          assert.equal(await env.raw.command('EXISTS', `redisson_lock_timeout:{${name}}`), 0, 'the cancelled waiter kept a deadline')
        }
        assert.deepEqual(await env.raw.hgetall(name), expected)
        assert.equal(await kind.make(third, name).holdCount({ owner }), 0)
        await holding.release()
        assert.equal(await env.raw.command('EXISTS', name), 0, 'the cancelled waiter took the lock after the release')
        const mine = await kind.make(third, name).tryAcquire({ owner })
        assert.ok(mine)
        await mine.release()
      })

      test(`${kind.kind}: extend keeps a hold past its first lease, in Redis and here`, async () => {
        const name = unique(`${kind.cls}-extend`)
        const held = await kind.make(env.client, name).acquire({ lease: 300 })
        await held.extend(5000)
        assert.ok(await env.raw.command('PTTL', name) > 3000, 'the hash kept its first lease')
        if (kind.read) {
          assert.ok(await env.raw.command('PTTL', readTimeoutKey(name, held.holder, 1)) > 3000, 'the timeout key kept its first lease')
        }
        await sleep(450) // past the first lease
        assert.equal(await rival(other, name).tryAcquire(), null, 'another client took it')
        assert.equal(held.lost, false)
        await held.release()
      })

      test(`${kind.kind}: extend of a watchdog hold makes it a lease that runs out; lock.extend acts for an owner`, async () => {
        const name = unique(`${kind.cls}-extend-dog`)
        const lock = kind.make(third, name) // this kind's own client: watchedLocks() counts its holds only
        const owner = newOwner()
        const held = await lock.acquire({ owner })
        assert.equal(third.watchedLocks(), 1)
        await lock.extend(400, { owner })
        assert.equal(third.watchedLocks(), 0, 'still renewed by the watchdog')
        const aborted = once(held.signal, 'abort')
        const pttl = await env.raw.command('PTTL', name)
        assert.ok(pttl > 0 && pttl <= 400, `PTTL ${pttl}`)
        await assert.rejects(lock.extend(400), crosslock.NotHeldError) // no owner named, none in scope
        await within(aborted, 5000, 'held.signal to abort when the extended lease ran out')
        await assert.rejects(lock.release({ owner }), LockLostError)
      })

      test(`${kind.kind}: extend is refused when not held and rejects LockLostError after a forceUnlock`, async () => {
        const name = unique(`${kind.cls}-extend-refused`)
        const lock = kind.make(env.client, name)
        const err = await lock.extend(5000, { owner: newOwner() }).then(() => null, (e) => e)
        assert.ok(err instanceof crosslock.NotHeldError, String(err))
        assert.equal(err.code, 'NOT_HELD')
        assert.match(err.message, /cannot extend/)
        const held = await lock.acquire()
        // A predicate, not the class: Deno's node:assert checks a class without its
        // Symbol.hasInstance (InvalidArgumentError is a RangeError or TypeError with a brand).
        const invalid = (e) => e instanceof crosslock.InvalidArgumentError
        await assert.rejects(held.extend(0), invalid)
        await assert.rejects(held.extend('5000'), invalid)
        assert.equal(await kind.make(other, name).forceUnlock(), true)
        const lost = await held.extend(5000).then(() => null, (e) => e)
        assert.ok(lost instanceof LockLostError, String(lost))
        assert.equal(lost.lockName, name)
        assert.equal(held.lost, true)
        assert.ok(held.signal.aborted)
        assert.equal(await env.raw.command('EXISTS', name), 0, 'the extend wrote')
        await assert.rejects(held.release(), LockLostError)
        await assert.rejects(held.extend(5000), crosslock.NotHeldError)
      })
    })
  }
})
