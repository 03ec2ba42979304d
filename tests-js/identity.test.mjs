// Who holds a lock from Node: sibling tasks exclude each other, owner scopes re-enter, explicit
// owners hand a lock over.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { channelOf, crosslock, unique, useRedis, waitUntil } from './helpers/util.mjs'

const { runAsOwner, currentOwner, newOwner, NotHeldError } = crosslock

const env = useRedis()

/** Runs `tasks` concurrently; each records when it is inside; returns the max overlap seen. */
async function overlap (tasks) {
  let inside = 0
  let max = 0
  const enter = async () => { max = Math.max(max, ++inside); await sleep(20); inside-- }
  await Promise.all(tasks.map((t) => t(enter)))
  return max
}

describe('sibling tasks', () => {
  test('two tasks started in the same tick on one Lock object exclude each other', async () => {
    const lock = env.client.lock(unique('siblings'))
    const task = async (enter) => {
      const held = await lock.acquire()
      try { await enter() } finally { await held.release() }
    }
    assert.equal(await overlap([task, task]), 1)
  })

  test('two withLock calls started together exclude each other', async () => {
    const lock = env.client.lock(unique('siblings2'))
    const task = (enter) => lock.withLock(() => enter())
    assert.equal(await overlap([task, task, task]), 1)
  })

  test('two runAsOwner tasks started together exclude each other', async () => {
    const lock = env.client.lock(unique('siblings3'))
    const task = (enter) => runAsOwner(async () => {
      await lock.acquire()
      try { await enter() } finally { await lock.release() }
    })
    assert.equal(await overlap([task, task]), 1)
  })

  test('sub-tasks inside one scope share its owner (re-enter) unless each gets its own scope', async () => {
    const lock = env.client.lock(unique('subtasks'))
    await runAsOwner(async () => {
      const owner = currentOwner()
      const shared = await Promise.all([lock.acquire({ wait: 0 }), lock.acquire({ wait: 0 })])
      assert.ok(shared.every((h) => h.owner === owner))
      assert.equal(await lock.holdCount(), 2)
      for (const h of shared) await h.release()
      const task = (enter) => runAsOwner(async () => {
        const held = await lock.acquire()
        try { await enter() } finally { await held.release() }
      })
      assert.equal(await overlap([task, task]), 1)
    })
  })
})

describe('owner scopes', () => {
  test('currentOwner is the scope owner across awaits, undefined outside', async () => {
    assert.equal(currentOwner(), undefined)
    const owner = newOwner()
    await runAsOwner(async () => {
      assert.equal(currentOwner(), owner)
      await sleep(1)
      await Promise.resolve()
      assert.equal(currentOwner(), owner)
    }, owner)
    assert.equal(currentOwner(), undefined)
  })

  test('newOwner hands out distinct numbers', () => {
    const owners = Array.from({ length: 100 }, () => newOwner())
    assert.equal(new Set(owners).size, 100)
    assert.ok(owners.every((n) => Number.isSafeInteger(n) && n > 0))
  })

  test('a nested acquire in the same scope re-enters, also through another Lock object and across locks', async () => {
    const name = unique('nested')
    const other = env.client.lock(unique('nested-other'))
    await env.client.lock(name).withLock(async (outer) => {
      const again = await env.client.lock(name).acquire({ wait: 0 })
      assert.equal(again.owner, outer.owner)
      await other.withLock(async (o) => {
        assert.equal(o.owner, outer.owner)
        assert.deepEqual(await env.raw.hgetall(other.name), { [outer.holder]: '1' })
      })
      assert.deepEqual(await env.raw.hgetall(name), { [outer.holder]: '2' })
      await again.release()
    })
    assert.equal(await env.client.lock(name).isLocked(), false)
  })

  test('held.release() uses the owner it was acquired with, even from another scope', async () => {
    const lock = env.client.lock(unique('ownrelease'))
    const held = await runAsOwner(() => lock.acquire())
    await runAsOwner(async () => {
      assert.equal(await lock.isHeld(), false)
      await held.release()
    })
    assert.equal(await lock.isLocked(), false)
  })
})

describe('explicit owner', () => {
  test('hands a lock from one task to another', async () => {
    const lock = env.client.lock(unique('handover'))
    const owner = newOwner()
    let handOver
    const handed = new Promise((resolve) => { handOver = resolve })
    const producer = (async () => {
      await lock.acquire({ owner })
      handOver()
    })()
    const consumer = (async () => {
      await handed
      assert.equal(await lock.isHeld({ owner }), true)
      await lock.release({ owner })
    })()
    await Promise.all([producer, consumer])
    assert.equal(await lock.isLocked(), false)
  })

  test('a released hand-over leaves the original HeldLock released; a stranger cannot release', async () => {
    const lock = env.client.lock(unique('handover2'))
    const owner = newOwner()
    const held = await lock.acquire({ owner })
    await assert.rejects(runAsOwner(() => lock.release()), NotHeldError)
    await env.client.lock(lock.name).release({ owner })
    assert.equal(held.released, true)
    assert.equal(await lock.isLocked(), false)
  })

  test('a waiting owner scope is woken when the other task releases', async () => {
    const lock = env.client.lock(unique('scopewake'))
    const first = await lock.acquire({ lease: 60_000 })
    let acquiredAt = 0
    const second = runAsOwner(async () => {
      await lock.acquire()
      acquiredAt = Date.now()
      await lock.release()
    })
    // The second scope has tried once and subscribed: it is parked, waiting for the release.
    await waitUntil(async () => (await env.raw.numsub(channelOf(lock.name))) === 1, 'the second task to wait')
    assert.equal(acquiredAt, 0)
    const releasedAt = Date.now()
    await first.release()
    await second
    await waitUntil(() => acquiredAt > 0, 'the second task to acquire')
    assert.ok(acquiredAt - releasedAt < 10_000)
  })
})
