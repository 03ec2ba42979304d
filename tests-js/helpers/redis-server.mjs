// Starts a throwaway redis-server (the one on PATH, Debian's by default, or the build
// CROSSLOCK_REDIS_BIN names) on a free loopback port, and stops it. Never port 6379, never a
// non-loopback address.
import { spawn } from 'node:child_process'
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * `$CROSSLOCK_REDIS_BIN/redis-server` (and `redis-cli` beside it) when that names a directory of a
 * server build, to run the suites against another Redis or Valkey (as `./dev matrix` does); else
 * the ones on PATH. Every fixture starts its servers and sentinels (`--sentinel`) with these.
 */
const binDir = process.env.CROSSLOCK_REDIS_BIN
export const REDIS_SERVER = binDir ? join(binDir, 'redis-server') : 'redis-server'
export const REDIS_CLI = binDir ? join(binDir, 'redis-cli') : 'redis-cli'

const running = new Set()
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})
// Ctrl-C, or the test runner stopping a file that ran past its timeout, ends the process without
// an 'exit' event: stop the servers first, then let the signal do what it would have done.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    for (const child of running) child.kill('SIGKILL')
    process.kill(process.pid, signal)
  })
}

// SIGKILL ends this process with no handler run at all: a watcher process, in a session of its
// own, waits for this one to end, then kills every server it was told about that is still a
// redis-server (a pid since reused is left alone) and removes its directory.
let reapList
function reapAtExit (pid, dir) {
  if (reapList === undefined) {
    reapList = join(mkdtempSync(join(tmpdir(), 'crosslock-test-servers-')), 'list')
    writeFileSync(reapList, '')
    const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 0.5; done; ` +
      'while read -r p d; do grep -q redis /proc/$p/cmdline 2>/dev/null && kill -9 $p; ' +
      'case "$d" in */crosslock-*) rm -rf "$d";; esac; done < "$0"; rm -rf "$(dirname "$0")"'
    spawn('sh', ['-c', script, reapList], { detached: true, stdio: 'ignore' }).unref()
  }
  // One line per append: servers started at once never share a line.
  appendFileSync(reapList, `${pid} ${dir ?? '-'}\n`)
}

/**
 * Has `child` (a server this process started) killed when this process ends, however it ends,
 * and `dir` (its directory, if it has one of its own) removed if this process is killed.
 */
export function killedWithUs (child, dir) {
  running.add(child)
  child.once('exit', () => running.delete(child))
  reapAtExit(child.pid, dir)
}

/** A port the kernel just gave us on 127.0.0.1 (free right now). */
export function freePort () {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Whether `port` can be listened on at 127.0.0.1 right now. */
function portFree (port) {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.unref()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * A free port whose cluster bus port, the port + 10000, is free too: that default is the only bus
 * port Redis 6.2 has (no `cluster-port` option), so one cluster fixture runs on every server.
 */
export async function freeClusterPort () {
  while (true) {
    const port = await freePort()
    if (port <= 55535 && await portFree(port + 10000)) return port
  }
}

/** Whether something accepts a connection on 127.0.0.1:`port` right now. */
export function canConnect (port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    socket.once('connect', () => { socket.destroy(); resolve(true) })
    socket.once('error', () => resolve(false))
  })
}

// A replica's full sync starts at once, and a master pings its replicas every second (Redis waits
// 5 s before a diskless sync and pings every 10 s; CLUSTER SLOTS lists a replica only once a ping
// has given it an offset): a cluster or a Sentinel group is ready in ~2 s instead of ~10.
const FAST_REPLICATION = ['--repl-diskless-sync-delay', '0', '--repl-ping-replica-period', '1']

/** Spawns redis-server on `port` with its files in `dir`; resolves once it accepts connections. */
async function spawnOn (port, dir, extraArgs) {
  const child = spawn(REDIS_SERVER, [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--dir', dir, '--loglevel', 'warning', ...FAST_REPLICATION, ...extraArgs
  ], { stdio: ['ignore', 'ignore', 'pipe'] })
  killedWithUs(child, dir)
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const deadline = Date.now() + 10_000
  while (true) {
    if (child.exitCode !== null) {
      running.delete(child)
      const error = new Error(`redis-server on port ${port} exited: ${stderr}`)
      error.exited = true
      throw error
    }
    if (await canConnect(port)) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`redis-server on port ${port} did not start within 10 s: ${stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return { child, exited }
}

async function startOnce (extraArgs, clusterNode) {
  const port = clusterNode ? await freeClusterPort() : await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'crosslock-redis-'))
  let child, exited
  try {
    ({ child, exited } = await spawnOn(port, dir, extraArgs))
  } catch (e) {
    if (e.exited) await rm(dir, { recursive: true, force: true })
    throw e
  }
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(timer)
    }
    running.delete(child)
    await rm(dir, { recursive: true, force: true })
  }
  /** kill -9: the server dies on the spot (no shutdown, no goodbye to clients). */
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  }
  /**
   * kill -9, then `downMs` later a new server on the same port and directory (it loads what its
   * AOF kept, if `args` turned AOF on).
   */
  const restart = async (downMs = 0) => {
    await kill()
    await new Promise((resolve) => setTimeout(resolve, downMs))
    ;({ child, exited } = await spawnOn(port, dir, extraArgs))
  }
  /** Sends `sig` to the server (`SIGSTOP`, `SIGCONT`: it stops answering, then resumes). */
  // By pid: Deno's ChildProcess.kill sends nothing after its first signal (a SIGSTOP).
  const signal = (sig) => process.kill(child.pid, sig)
  return { host: '127.0.0.1', port, url: `redis://127.0.0.1:${port}/0`, dir, stop, kill, restart, signal }
}

/**
 * Starts a redis-server; resolves to `{ host, port, url, stop }`. Retries on another port if the
 * one picked was taken in the meantime. `clusterNode`: a cluster node (`--cluster-enabled yes`)
 * on a port whose bus port (+ 10000) is free.
 */
export async function startRedis ({ args = [], clusterNode = false } = {}) {
  let lastError
  if (clusterNode) args = ['--cluster-enabled', 'yes', ...args]
  for (let i = 0; i < 3; i++) {
    try {
      return await startOnce(args, clusterNode)
    } catch (e) {
      lastError = e
    }
  }
  throw lastError
}
