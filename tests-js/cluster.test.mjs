// On a Redis Cluster, from Node: a `redis+cluster://` client runs every object's scripts on the
// master owning its slot, waiters use sharded pub/sub (Redis 7) like Redisson's default, the
// watchdog renews locks spread over every slot, names that would split an object over two slots
// are refused, and a failover (CLUSTER FAILOVER, kill -9 of a master) is followed: waiters keep
// waiting and acquire on the new master, a hold that reached the replica is kept, a hold that did
// not is reported lost, and no call hangs past its limit.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { startCluster } from './helpers/cluster.mjs'
import { aFailoverKeepsReplicatedHoldsAndReportsTheOthersLost, killingTheMasterIsSurvivedByWaiters } from './helpers/failover.mjs'
import { crosslock, eightWorkersExcludeEachOther, onNode, releaseWakesEveryKind, unique, waitUntil } from './helpers/util.mjs'

const { InvalidArgumentError, RedisUnavailableError } = crosslock

/** [sharded subscribers on the master owning `channel`, plain subscribers on every master]. */
async function subscribers (cluster, channel) {
  const sharded = await onNode(await cluster.masterOf(channel), (r) => r.command('PUBSUB', 'SHARDNUMSUB', channel))
  let plain = 0
  for (const port of await cluster.masters()) plain += await onNode(port, (r) => r.numsub(channel))
  return [Number(sharded[1]), plain]
}

describe('one cluster', () => {
  let cluster
  const clients = []
  const connect = async (options = {}, suffix = '') => {
    const c = await crosslock.connect(cluster.url + suffix, { connectTimeout: 8000, ...options })
    clients.push(c)
    return c
  }
  before(async () => { cluster = await startCluster() })
  after(async () => {
    for (const c of clients) await c.close()
    await cluster?.stop()
  })

  test('fifty locks land on the masters owning their slots', async () => {
    const client = await connect()
    assert.match(client.address, /^cluster via 127\.0\.0\.1:/)
    const names = Array.from({ length: 50 }, (_, i) => `js:cluster:spread:${process.pid}:${i}`)
    const held = []
    for (const name of names) held.push(await client.lock(name).acquire())
    const masters = new Set()
    for (const [i, name] of names.entries()) {
      const port = await cluster.masterOf(name)
      masters.add(port)
      assert.deepEqual(Object.keys(await onNode(port, (r) => r.hgetall(name))), [held[i].holder])
    }
    assert.deepEqual([...masters].sort(), (await cluster.masters()).sort())
    for (const h of held) await h.release()
    for (const name of names) {
      assert.equal(await onNode(await cluster.masterOf(name), (r) => r.command('EXISTS', name)), 0)
    }
  })

  test('eight workers exclude each other exactly', async () => {
    await eightWorkersExcludeEachOther([await connect(), await connect()], unique('js:cluster:counter'))
  })

  test('a release wakes the waiter of every kind, through sharded pub/sub', async () => {
    // Redis 7 everywhere: SSUBSCRIBE on the node owning the channel, as Redisson's default (AUTO)
    // does (the fair lock's waiters each have a channel of their own).
    const subscribed = (channel) => channel === null
      ? sleep(200)
      : waitUntil(async () => JSON.stringify(await subscribers(cluster, channel)) === '[1,0]', channel, 5000, 50)
    await releaseWakesEveryKind(await connect(), await connect(), unique('js:cluster:wake'), subscribed)
  })

  test('plain pub/sub when asked', async () => {
    const a = await connect({}, '?sharded_pubsub=off')
    const b = await connect({}, '?sharded_pubsub=off')
    const name = unique('js:cluster:plain')
    const held = await a.lock(name).acquire({ lease: 120_000 })
    const waiter = b.lock(name).acquire({ wait: 20_000 })
    const channel = `redisson_lock__channel:{${name}}`
    await waitUntil(async () => JSON.stringify(await subscribers(cluster, channel)) === '[0,1]', channel, 5000, 50)
    await held.release()
    await (await waiter).release()
  })

  test('the watchdog renews locks in every slot, and a deleted one is reported lost', async () => {
    const client = await connect({ watchdogTimeout: 900 })
    const names = Array.from({ length: 50 }, (_, i) => `js:cluster:watchdog:${process.pid}:${i}`)
    const held = []
    for (const name of names) held.push(await client.lock(name).acquire())
    await sleep(2500)
    for (const [i, name] of names.entries()) {
      assert.equal(held[i].lost, false, name)
      assert.ok(await onNode(await cluster.masterOf(name), (r) => r.command('PTTL', name)) > 0, name)
    }
    await onNode(await cluster.masterOf(names[17]), (r) => r.command('DEL', names[17]))
    await waitUntil(() => held[17].lost, 'the renewal to report the lock lost', 5000)
    assert.equal(held.filter((h) => h.lost).length, 1)
    for (const [i, h] of held.entries()) if (i !== 17) await h.release()
  })

  test("the README's cluster example connects", async () => {
    const text = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const section = text.split('\n## Deployments')[1].split('\n## ')[0]
    const [block] = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).filter((b) => b.includes('redis+cluster'))
    const url = 'redis+cluster://10.0.1.1:6379,10.0.1.2:6379,10.0.1.3:6379'
    assert.ok(block.includes(url))
    const AsyncFunction = (async () => {}).constructor
    const run = new AsyncFunction('connect', `${block.replace(url, cluster.url)}\nreturn cluster`)
    const client = await run(crosslock.connect)
    clients.push(client)
    assert.match(client.address, /^cluster via 127\.0\.0\.1:/)
    await (await client.lock(unique('js:readme:cluster')).acquire()).release()
  })

  test('names that would split an object over two slots are refused', async () => {
    const client = await connect()
    for (const name of ['a{b', 'a{}b', 'a}b']) {
      assert.throws(() => client.lock(name), (e) => e instanceof InvalidArgumentError && /hash slots/.test(e.message))
    }
    assert.throws(() => client.countDownLatch('{orders}:7'), InvalidArgumentError)
    await (await client.fairLock('{orders}:42').acquire()).release()
    await assert.rejects(crosslock.connect(`redis+cluster://127.0.0.1:${cluster.nodes[0].port}/3`),
      (e) => e instanceof InvalidArgumentError && /database 0/.test(e.message))
    const started = Date.now()
    await assert.rejects(crosslock.connect('redis+cluster://127.0.0.1:1', { connectTimeout: 500 }), RedisUnavailableError)
    assert.ok(Date.now() - started < 5000)
  })
})

/** The node's client connections (id → last command), but for the one asking. */
async function connections (port) {
  return onNode(port, (r) => r.clients())
}

describe('cluster lanes', () => {
  test('calls go over a lane to the master of their slot, and follow the slot when it moves', async () => {
    // Calls in quick succession make their round trips over a connection of the thread's own,
    // watched by its event loop, to the master serving the lock's slot and to no other. When the
    // slot moves, that lane's reply is a redirect: the call goes the routed way (no error, the
    // lock stays exact), and the next calls get a lane to the new master.
    const cluster = await startCluster()
    const client = await crosslock.connect(cluster.url, { connectTimeout: 8000 })
    const name = `js:cluster:lane:${process.pid}`
    const lock = client.lock(name)
    const pairs = async (n) => {
      for (let i = 0; i < n; i++) {
        const held = await lock.acquire({ wait: 5000 })
        assert.equal(await lock.holdCount({ owner: held.owner }), 1)
        await held.release()
      }
    }
    const snapshot = async () => {
      const all = new Map()
      for (const port of await cluster.masters()) all.set(port, await connections(port))
      return all
    }
    // Runs pairs; whether they went over one connection opened on `port` since `since` (a
    // server's own MIGRATE connection aside), none opened on another master.
    const aLaneOnlyTo = async (port, since) => {
      await pairs(30)
      const opened = new Map()
      for (const [p, before] of since) {
        opened.set(p, [...(await connections(p))].filter(([id, cmd]) => !before.has(id) && cmd !== 'restore-asking'))
      }
      for (const [p, ids] of opened) {
        if (p !== port) assert.deepEqual(ids, [], `connections opened on 127.0.0.1:${p}`)
      }
      return opened.get(port).length === 1
    }
    try {
      const first = await cluster.masterOf(name)
      // The first calls go the routed way while the slot map is read and the lane opens.
      const start = await snapshot()
      await waitUntil(() => aLaneOnlyTo(first, start), "a lane to the slot's master", 15_000, 50)
      // Established: the next calls use it and open nothing anywhere.
      let before = await snapshot()
      await pairs(100)
      for (const [p, known] of before) {
        assert.deepEqual([...(await connections(p)).keys()].filter((id) => !known.has(id)), [], `opened on ${p}`)
      }

      const second = (await cluster.masters()).find((p) => p !== first)
      before = await snapshot()
      const held = await lock.acquire({ wait: 5000 })
      await cluster.moveSlot(name, second)
      assert.deepEqual(Object.keys(await onNode(second, (r) => r.hgetall(name))), [held.holder], 'the hold moved with its slot')
      // Over the old master's lane: redirected, and sent the routed way.
      assert.equal(await lock.holdCount({ owner: held.owner }), 1)
      await held.release()
      await waitUntil(() => aLaneOnlyTo(second, before), 'a lane to the new master', 15_000, 50)
      assert.equal(await onNode(second, (r) => r.command('EXISTS', name)), 0)
    } finally {
      await client.close()
      await cluster.stop()
    }
  })
})

describe('cluster failover', () => {
  test('CLUSTER FAILOVER keeps the replicated hold and reports the other lost', async () => {
    const cluster = await startCluster()
    try {
      await aFailoverKeepsReplicatedHoldsAndReportsTheOthersLost(cluster)
    } finally {
      await cluster.stop()
    }
  })

  test('kill -9 of a master is survived by waiters, and no call hangs', async () => {
    const cluster = await startCluster()
    try {
      await killingTheMasterIsSurvivedByWaiters(cluster)
    } finally {
      await cluster.stop()
    }
  })
})
