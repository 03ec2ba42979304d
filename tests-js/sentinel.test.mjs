// Behind Redis Sentinel, from Node: a `redis+sentinel://` client finds the master, every object
// works there, and a failover (SENTINEL FAILOVER, kill -9 of the master) is followed: waiters keep
// waiting and acquire on the new master, a hold that reached the replica is kept, a hold that did
// not is reported lost, and no call hangs past its limit.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { freePort } from './helpers/redis-server.mjs'
import { aFailoverKeepsReplicatedHoldsAndReportsTheOthersLost, killingTheMasterIsSurvivedByWaiters } from './helpers/failover.mjs'
import { startSentinelGroup } from './helpers/sentinel.mjs'
import { crosslock, eightWorkersExcludeEachOther, onNode, releaseWakesEveryKind, unique, waitUntil } from './helpers/util.mjs'

const { InvalidArgumentError, RedisUnavailableError } = crosslock

describe('one sentinel group', () => {
  let group
  const clients = []
  const connect = async (options = {}) => {
    const c = await crosslock.connect(group.url, { connectTimeout: 8000, ...options })
    clients.push(c)
    return c
  }
  before(async () => { group = await startSentinelGroup() })
  after(async () => {
    for (const c of clients) await c.close()
    await group?.stop()
  })

  test('the lock lives on the master', async () => {
    const client = await connect()
    assert.match(client.address, /master 'crosslock' via sentinels/)
    const name = unique('js:sentinel:where')
    const held = await client.lock(name).acquire()
    const fields = await onNode(await group.masterPort(), (r) => r.hgetall(name))
    assert.deepEqual(Object.keys(fields), [held.holder])
    await held.release()
  })

  test('eight workers exclude each other exactly', async () => {
    await eightWorkersExcludeEachOther([await connect(), await connect()], unique('js:sentinel:counter'))
  })

  test('a release wakes the waiter of every kind', async () => {
    await releaseWakesEveryKind(await connect(), await connect(), unique('js:sentinel:wake'))
  })

  test('the watchdog renews, and a deleted lock is reported lost', async () => {
    const client = await connect({ watchdogTimeout: 600 })
    const name = unique('js:sentinel:watchdog')
    const held = await client.lock(name).acquire()
    await sleep(1500)
    assert.equal(held.lost, false)
    await onNode(await group.masterPort(), (r) => r.command('DEL', name))
    await waitUntil(() => held.lost, 'the renewal to report the lock lost', 5000)
    assert.equal(held.signal.aborted, true)
  })

  test("the README's Deployments example connects", async () => {
    const text = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const section = text.split('\n## Deployments')[1].split('\n## ')[0]
    const [block] = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
    const url = 'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster/0'
    assert.ok(block.includes(url))
    const AsyncFunction = (async () => {}).constructor
    const run = new AsyncFunction('connect', `${block.replace(url, group.url)}\nreturn client`)
    const client = await run(crosslock.connect)
    clients.push(client)
    assert.match(client.address, /^master 'crosslock' via sentinels/)
    // The waitForReplicas line, with this group as its `url`.
    const [replicas] = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).filter((b) => b.includes('waitForReplicas'))
    const synced = await new AsyncFunction('connect', 'url', `${replicas}\nreturn client`)(crosslock.connect, group.url)
    clients.push(synced)
    await (await synced.lock('js:sentinel:readme-synced').acquire()).release()
  })

  test('waitForReplicas: an acquisition returns once the replica has it, or is given back', async () => {
    const client = await connect({ waitForReplicas: 1, replicaWaitTimeout: 500 })
    const name = unique('js:sentinel:synced')
    const held = await client.lock(name).acquire()
    // No waiting here: the acquire resolved after the replica acknowledged it.
    const fields = await onNode((await group.replica()).port, (r) => r.hgetall(name))
    assert.deepEqual(fields, { [held.holder]: '1' })
    await held.release()

    // Two replicas asked for, one there: given back, a clear error, nothing held.
    const short = await connect({ waitForReplicas: 2, replicaWaitTimeout: 200 })
    const other = unique('js:sentinel:short')
    await assert.rejects(short.lock(other).acquire({ wait: 5000 }), (e) => {
      assert.ok(e instanceof RedisUnavailableError, String(e))
      assert.match(e.message, /1 of the 2 replica\(s\).*given back/)
      return true
    })
    assert.equal(await onNode(await group.masterPort(), (r) => r.command('EXISTS', other)), 0)
    await assert.rejects(crosslock.connect(group.url, { waitForReplicas: 0 }), InvalidArgumentError)
  })

  test('a wrong master name or no sentinel is a clear error', async () => {
    const [port] = group.sentinelPorts()
    await assert.rejects(crosslock.connect(`redis+sentinel://127.0.0.1:${port}/no-such-master`),
      (e) => e instanceof InvalidArgumentError && /no-such-master/.test(e.message))
    const dead = await freePort()
    const started = Date.now()
    await assert.rejects(crosslock.connect(`redis+sentinel://127.0.0.1:${dead}/crosslock`, { connectTimeout: 500 }),
      (e) => e instanceof RedisUnavailableError && e.message.includes(`127.0.0.1:${dead}`))
    assert.ok(Date.now() - started < 5000)
    await assert.rejects(crosslock.connect(`redis+sentinel://127.0.0.1:${port}`),
      (e) => e instanceof InvalidArgumentError && /master/.test(e.message))
  })
})

describe('failover', () => {
  test('SENTINEL FAILOVER keeps the replicated hold and reports the other lost', async () => {
    const group = await startSentinelGroup()
    try {
      await aFailoverKeepsReplicatedHoldsAndReportsTheOthersLost(group)
    } finally {
      await group.stop()
    }
  })

  test('kill -9 of the master is survived by waiters, and no call hangs', async () => {
    const group = await startSentinelGroup()
    try {
      await killingTheMasterIsSurvivedByWaiters(group)
    } finally {
      await group.stop()
    }
  })
})
