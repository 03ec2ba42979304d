// A Sentinel deployment on loopback ports: a master, one replica and three sentinels (quorum 2, a
// master is down after 1 s of silence), all stopped by `stop()`.
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { REDIS_SERVER, freePort, killedWithUs, startRedis } from './redis-server.mjs'
import { ask, replicaCaughtUp, replicasAcknowledged, waitUntil } from './util.mjs'

const NAME = 'crosslock'

async function sentinelMaster (port) {
  const flat = await ask(port, 'SENTINEL', 'MASTER', NAME)
  if (!Array.isArray(flat)) return {}
  const out = {}
  for (let i = 0; i < flat.length; i += 2) out[flat[i]] = flat[i + 1]
  return out
}

/** The last lines of a sentinel's log (for a sentinel or a group that did not come up). */
async function logTail (log) {
  try {
    return (await readFile(log, 'utf8')).trim().split('\n').slice(-5).join(' | ')
  } catch {
    return '(no log)'
  }
}

/**
 * A sentinel of the group on a free port, answering for the group; tried on another port when the
 * probed one was taken before the sentinel could bind it (as the servers are).
 */
async function startSentinel (dir, masterPort) {
  let last = ''
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    const conf = join(dir, `sentinel-${port}.conf`)
    const log = join(dir, `sentinel-${port}.log`)
    await writeFile(conf, [
      `port ${port}`, 'bind 127.0.0.1', 'protected-mode no', `dir ${dir}`, `logfile ${log}`,
      `sentinel monitor ${NAME} 127.0.0.1 ${masterPort} 2`,
      `sentinel down-after-milliseconds ${NAME} 1000`,
      `sentinel failover-timeout ${NAME} 4000`, ''
    ].join('\n'))
    const child = spawn(REDIS_SERVER, [conf, '--sentinel', '--loglevel', 'warning'], { stdio: 'ignore' })
    killedWithUs(child, dir)
    const exited = new Promise((resolve) => child.once('exit', resolve))
    let gone = false
    exited.then(() => { gone = true })
    const deadline = Date.now() + 10_000
    while (!gone && Date.now() < deadline) {
      // A sentinel of ours answers for the group; a stranger on the port would not.
      if (Array.isArray(await ask(port, 'SENTINEL', 'MASTER', NAME))) return { port, child, log }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    last = gone ? await logTail(log) : 'no answer'
    child.kill('SIGKILL')
    await exited
  }
  throw new Error(`a sentinel did not start: ${last}`)
}

export async function startSentinelGroup () {
  const master = await startRedis()
  const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(master.port)] })
  const nodes = [master, replica]
  const dir = await mkdtemp(join(tmpdir(), 'crosslock-sentinel-'))
  const sentinels = []
  const group = {
    name: NAME,
    nodes,
    get url () {
      return `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${NAME}/0`
    },
    sentinelPorts: () => sentinels.map((s) => s.port),
    async masterPort () { return Number((await sentinelMaster(sentinels[0].port)).port) },
    node (port) { return nodes.find((n) => n.port === port) },
    async master () { return group.node(await group.masterPort()) },
    async replica () {
      const port = await group.masterPort()
      return nodes.find((n) => n.port !== port)
    },
    /** Waits until the replica has applied every write the master made so far. */
    async sync () {
      await replicaCaughtUp((await group.master()).port, (await group.replica()).port)
    },
    /** The node that takes over from the master (the group's one master: any key). */
    async successorOf () { return (await group.replica()).port },
    /**
     * Resolves to the port of the master every sentinel names once `wanted(port)` holds of it
     * and it takes writes.
     */
    async waitFor (wanted) {
      return waitUntil(async () => {
        const ports = new Set()
        for (const s of sentinels) ports.add((await sentinelMaster(s.port)).port)
        if (ports.size !== 1) return null
        const port = Number([...ports][0])
        if (!port || !wanted(port)) return null
        const role = await ask(port, 'ROLE')
        return Array.isArray(role) && role[0] === 'master' ? port : null
      }, 'the failover', 30_000, 50)
    },
    async waitForNewMaster (before) { return group.waitFor((port) => port !== before) },
    async waitForMaster (_key, port) { await group.waitFor((now) => now === port) },
    /** `SENTINEL FAILOVER`; resolves to [old, new] master ports once the new one takes writes. */
    async failover () {
      const before = await group.masterPort()
      await ask(sentinels[0].port, 'SENTINEL', 'FAILOVER', NAME)
      return [before, await group.waitForNewMaster(before)]
    },
    /** kill -9 of the master, resolving at once to [its port, the replica's]. */
    async killMasterOf () {
      const [before, successor] = [await group.masterPort(), await group.successorOf()]
      await group.node(before).kill()
      return [before, successor]
    },
    async stop () {
      for (const s of sentinels) {
        s.child.kill('SIGKILL')
        if (s.child.exitCode === null && s.child.signalCode === null) {
          await new Promise((resolve) => s.child.once('exit', resolve))
        }
      }
      for (const n of nodes) await n.stop()
      await rm(dir, { recursive: true, force: true })
    }
  }
  try {
    for (let i = 0; i < 3; i++) sentinels.push(await startSentinel(dir, master.port))
    await waitUntil(async () => {
      for (const s of sentinels) {
        const m = await sentinelMaster(s.port)
        if (m['num-slaves'] !== '1' || m['num-other-sentinels'] !== '2' || m.flags !== 'master') return false
      }
      const info = await ask(replica.port, 'INFO', 'replication')
      if (typeof info !== 'string' || !info.includes('master_link_status:up')) return false
      const onMaster = await ask(master.port, 'INFO', 'replication')
      return typeof onMaster === 'string' && replicasAcknowledged(onMaster, 1)
    }, 'the sentinel group to come up', 30_000, 100).catch(async (e) => {
      // Say what each sentinel saw.
      const seen = []
      for (const s of sentinels) {
        const m = await sentinelMaster(s.port)
        seen.push(`sentinel ${s.port} (${s.child.exitCode === null && s.child.signalCode === null ? 'running' : 'exited'}): ` +
          `flags=${m.flags} replicas=${m['num-slaves']} other sentinels=${m['num-other-sentinels']}; log: ${await logTail(s.log)}`)
      }
      throw new Error(`${e.message}: ${seen.join('; ')}`)
    })
  } catch (e) {
    await group.stop()
    throw e
  }
  return group
}
