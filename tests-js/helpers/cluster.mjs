// A Redis Cluster on loopback ports: three masters with a replica each (`redis-cli --cluster
// create`; a node is failed after 1 s of silence), all stopped by `stop()`.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

import { REDIS_CLI, startRedis } from './redis-server.mjs'
import { ask, replicaCaughtUp, replicasAcknowledged, waitUntil } from './util.mjs'

const run = promisify(execFile)

/** `CLUSTER SLOTS` of the node at `port` as sorted `[first, last, masterPort, [replicaPorts]]`. */
async function slotMap (port) {
  const reply = await ask(port, 'CLUSTER', 'SLOTS')
  if (!Array.isArray(reply)) return null
  return reply
    .map(([lo, hi, master, ...replicas]) => [Number(lo), Number(hi), Number(master[1]), replicas.map((r) => Number(r[1]))])
    .sort((x, y) => x[0] - y[0])
}

export async function startCluster () {
  const nodes = []
  const dead = new Set()
  const live = () => nodes.filter((n) => !dead.has(n.port))
  const cluster = {
    nodes,
    get url () { return `redis+cluster://127.0.0.1:${nodes[0].port},127.0.0.1:${nodes[1].port}` },
    async slots () { return slotMap(live()[0].port) },
    async keySlot (key) { return Number(await ask(live()[0].port, 'CLUSTER', 'KEYSLOT', key)) },
    async rangeOf (key) {
      const slot = await cluster.keySlot(key)
      return (await cluster.slots()).find(([lo, hi]) => lo <= slot && slot <= hi)
    },
    async masterOf (key) { return (await cluster.rangeOf(key))[2] },
    async replicaOf (key) { return (await cluster.rangeOf(key))[3][0] },
    /** The node that takes over from `key`'s master: its replica. */
    async successorOf (key) { return cluster.replicaOf(key) },
    async masters () { return (await cluster.slots()).map((r) => r[2]) },
    node (port) { return nodes.find((n) => n.port === port) },
    /** Waits until the replica of `key`'s master has applied every write it made so far. */
    async sync (key) {
      await replicaCaughtUp(await cluster.masterOf(key), await cluster.replicaOf(key))
    },
    async waitForMaster (key, port) {
      const slot = await cluster.keySlot(key)
      await waitUntil(async () => {
        for (const n of live()) {
          const map = await slotMap(n.port)
          if (!map || !map.some(([lo, hi, m]) => lo <= slot && slot <= hi && m === port)) return false
        }
        return true
      }, `127.0.0.1:${port} to serve '${key}'`, 30_000, 50)
    },
    /** `CLUSTER FAILOVER` on the replica of `key`'s master; resolves to [old, new] once agreed. */
    async failover (key) {
      const [old, neu] = [await cluster.masterOf(key), await cluster.replicaOf(key)]
      await ask(neu, 'CLUSTER', 'FAILOVER')
      await cluster.waitForMaster(key, neu)
      return [old, neu]
    },
    /**
     * Moves the slot of `key`, with its keys, from its master to the master on port `to`, as
     * `redis-cli --cluster reshard` does (IMPORTING and MIGRATING, MIGRATE of each key, then
     * `CLUSTER SETSLOT … NODE` on every master); resolves once every node agrees.
     */
    async moveSlot (key, to) {
      const slot = String(await cluster.keySlot(key))
      const from = await cluster.masterOf(key)
      const masters = await cluster.masters()
      if (to === from || !masters.includes(to)) throw new Error(`127.0.0.1:${to} is not another master`)
      const toId = await ask(to, 'CLUSTER', 'MYID')
      const fromId = await ask(from, 'CLUSTER', 'MYID')
      await ask(to, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId)
      await ask(from, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId)
      for (;;) {
        const keys = await ask(from, 'CLUSTER', 'GETKEYSINSLOT', slot, '100')
        if (!keys?.length) break
        await ask(from, 'MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys)
      }
      await ask(to, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId)
      await ask(from, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId)
      for (const port of masters) {
        if (port !== to && port !== from) await ask(port, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId)
      }
      await cluster.waitForMaster(key, to)
    },
    /** kill -9 of the master serving `key`; resolves to [old, new] once its replica took over. */
    /** kill -9 of `key`'s master, resolving at once to [its port, its replica's]. */
    async killMasterOf (key) {
      const [old, neu] = [await cluster.masterOf(key), await cluster.replicaOf(key)]
      await cluster.node(old).kill()
      dead.add(old)
      return [old, neu]
    },
    async stop () {
      for (const n of nodes) await n.stop()
    }
  }
  try {
    // `redis-cli --cluster create` is tried again with fresh nodes when it fails: what fails it
    // (a node slow to answer on a loaded machine) is not what the tests are about.
    for (let attempt = 1; ; attempt++) {
      for (let i = 0; i < 6; i++) {
        nodes.push(await startRedis({ clusterNode: true, args: ['--cluster-node-timeout', '1000'] }))
      }
      try {
        await run(REDIS_CLI, ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas', '1', '--cluster-yes'], { timeout: 60_000 })
        break
      } catch (e) {
        const said = `${e.message}; stdout: ${e.stdout ?? ''}; stderr: ${e.stderr ?? ''}`
        if (attempt === 3) throw new Error(`redis-cli --cluster create failed three times; the last time: ${said}`)
        console.error(`redis-cli --cluster create failed, trying with fresh nodes: ${said}`)
        await cluster.stop()
        nodes.length = 0
      }
    }
    await waitUntil(async () => {
      const maps = []
      for (const n of nodes) {
        const info = await ask(n.port, 'CLUSTER', 'INFO')
        if (typeof info !== 'string' || !info.includes('cluster_state:ok')) return false
        const map = await slotMap(n.port)
        if (!map) return false
        maps.push(JSON.stringify(map))
        const role = await ask(n.port, 'ROLE')
        const repl = await ask(n.port, 'INFO', 'replication')
        if (typeof repl !== 'string') return false
        if (Array.isArray(role) && role[0] === 'slave') {
          if (!repl.includes('master_link_status:up')) return false
        } else if (!replicasAcknowledged(repl, 1)) return false
      }
      const first = JSON.parse(maps[0])
      const covered = first.reduce((sum, [lo, hi]) => sum + hi - lo + 1, 0)
      return covered === 16384 && first.every((r) => r[3].length > 0) && maps.every((m) => m === maps[0])
    }, 'the cluster to settle', 30_000, 100)
  } catch (e) {
    await cluster.stop()
    throw e
  }
  return cluster
}
