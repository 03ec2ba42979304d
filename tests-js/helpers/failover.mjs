// The failover cases Sentinel and Cluster share, run over a topology: a Sentinel group
// (helpers/sentinel.mjs) or a cluster (helpers/cluster.mjs). Each offers `url`, and of a key:
// `sync`, `successorOf` (the node that takes over from its master), `failover` (graceful;
// resolves to [old, new] once the new master serves), `killMasterOf` (kill -9, resolving at
// once to [old, successor]) and `waitForMaster`. A Sentinel group has one master for every key.

import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { crosslock, onNode, unique, waitUntil } from './util.mjs'

const { RedisUnavailableError } = crosslock

/** Retries `held.release()` until the client has followed the master to the new one. */
async function releaseOnTheNewMaster (held) {
  await waitUntil(async () => {
    try {
      await held.release()
      return true
    } catch (e) {
      if (e instanceof RedisUnavailableError) return false
      throw e
    }
  }, 'the release to reach the new master', 15_000, 200)
}

/**
 * A graceful failover while locks are held and a waiter waits: the lock that reached the next
 * master stays held (its holder renews it there, the waiter stays out), the lock that did not is
 * reported lost, and the waiter acquires once the holder releases on the new master. The names
 * share a hash tag, so that one failover moves both on a cluster.
 */
export async function aFailoverKeepsReplicatedHoldsAndReportsTheOthersLost (topology) {
  const keptName = '{js:failover}:kept'
  const droppedName = '{js:failover}:dropped'
  // A lease that outlasts the failover (renewed every 2 s): a hold is lost only because the new
  // master does not have it.
  const options = { connectTimeout: 8000, watchdogTimeout: 6000 }
  const holder = await crosslock.connect(topology.url, options)
  const other = await crosslock.connect(topology.url, options)
  try {
    const dropped = await holder.lock(droppedName).acquire()
    await topology.sync(droppedName)
    // The next master loses the first lock: as if the master failed before replicating it (a
    // cluster replica redirects keyed writes; FLUSHALL names no key).
    await onNode(await topology.successorOf(keptName), async (r) => {
      await r.command('CONFIG', 'SET', 'replica-read-only', 'no')
      await r.command('FLUSHALL')
    })
    const kept = await holder.lock(keptName).acquire()
    await topology.sync(keptName)
    let waiterDone = false
    const waiter = other.lock(keptName).acquire({ wait: 30_000 }).finally(() => { waiterDone = true })
    await sleep(200)
    const [old, neu] = await topology.failover(keptName)
    assert.notEqual(old, neu)

    await waitUntil(() => dropped.lost, 'the hold that never reached the new master to be reported lost', 10_000)
    await sleep(5000) // renewals on the new master
    assert.equal(kept.lost, false)
    assert.equal(waiterDone, false, 'the waiter got in while the lock was held')
    assert.deepEqual(Object.keys(await onNode(neu, (r) => r.hgetall(keptName))), [kept.holder])
    await kept.release()
    await (await waiter).release()
  } finally {
    await holder.close()
    await other.close()
  }
}

/**
 * kill -9 of the master while a lock is held and a waiter waits: a call during the outage ends
 * within its limits, the waiter keeps waiting through it, on a subscription that follows the lock
 * to the new master (the 60 s lease outlasts its wait, so only the release's message lets it in),
 * and acquires there once the lock is released.
 */
export async function killingTheMasterIsSurvivedByWaiters (topology) {
  const options = { connectTimeout: 20_000, responseTimeout: 1000 }
  const holder = await crosslock.connect(topology.url, options)
  const other = await crosslock.connect(topology.url, options)
  try {
    const name = unique('js:kill')
    const held = await holder.lock(name).acquire({ lease: 60_000 })
    await topology.sync(name)
    let waiterDone = false
    const waiter = other.lock(name).acquire({ wait: 40_000 }).finally(() => { waiterDone = true })
    await sleep(200)

    const [, successor] = await topology.killMasterOf(name)
    // A call during the outage, to the same master (the hash tag is the lock's name).
    const started = Date.now()
    await holder.lock(`{${name}}:probe`).tryAcquire().catch((e) => {
      if (!(e instanceof RedisUnavailableError)) throw e
    })
    assert.ok(Date.now() - started < 5000, 'a call during the outage ends within its limits')
    await topology.waitForMaster(name, successor)
    await sleep(3000) // long enough for the waiter to wait again, on the new master
    assert.equal(waiterDone, false, 'the waiter got in while the lock was held')
    await releaseOnTheNewMaster(held)
    await (await waiter).release()
  } finally {
    await holder.close()
    await other.close()
  }
}
