// After the last client's close() no crosslock thread is left in the process, and the process
// then exits by itself. A client of another environment (a worker_thread) keeps crosslock's
// runtime running after the main thread's client closed. Runs in a fresh process: this one's
// other files have clients of their own.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import { startRedis } from './helpers/redis-server.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

const env = {}
before(async () => { env.server = await startRedis() })
after(async () => { await env.server?.stop() })

const PROGRAM = `
const fs = require('node:fs')
const { Worker } = require('node:worker_threads')
const { connect } = require(${JSON.stringify(ROOT)})

function crosslockThreads () {
  const names = []
  for (const task of fs.readdirSync('/proc/self/task')) {
    try { names.push(fs.readFileSync('/proc/self/task/' + task + '/comm', 'utf8').trim()) } catch {}
  }
  return names.filter((name) => name.startsWith('crosslock'))
}

// A joined thread may be listed for a moment while the kernel reaps it: a 10 s watchdog.
async function noThreadLeft () {
  const deadline = Date.now() + 10_000
  while (crosslockThreads().length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setImmediate(resolve))
  }
  return crosslockThreads()
}

const WORKER = \`
const { parentPort, workerData } = require('node:worker_threads')
const { connect } = require(workerData.root)
;(async () => {
  const client = await connect(workerData.url)
  parentPort.postMessage('connected')
  await new Promise((resolve) => parentPort.once('message', resolve))
  const held = await client.lock('threads:worker').acquire()
  await held.release()
  await client.close()
  parentPort.postMessage('used and closed')
  parentPort.close()
})()
\`

;(async () => {
  const url = process.argv[1]
  const seen = {}
  const client = await connect(url)
  const held = await client.lock('threads:main').acquire()
  await held.release()
  seen.whileOpen = [...new Set(crosslockThreads())].sort()

  const worker = new Worker(WORKER, { eval: true, workerData: { url, root: ${JSON.stringify(ROOT)} } })
  // Its 'exit' may come before its last message is read: listened for from the start.
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  const messages = []
  const next = () => new Promise((resolve) => worker.once('message', resolve))
  messages.push(await next())
  await client.close()
  seen.afterMainClose = [...new Set(crosslockThreads())].sort()
  const used = next()
  worker.postMessage('go')
  messages.push(await used)
  seen.messages = messages
  await exited
  seen.afterLastClose = await noThreadLeft()

  const again = await connect(url)
  const lock = again.lock('threads:again')
  const heldAgain = await lock.acquire()
  seen.againLocked = await lock.isLocked()
  await heldAgain.release()
  await again.close()
  seen.afterSecondClose = await noThreadLeft()
  console.log(JSON.stringify(seen))
})()
`

test('no crosslock thread after the last close, even with worker_threads; the process exits by itself', async () => {
  const child = spawn(process.execPath, ['-e', PROGRAM, env.server.url], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { err += d })
  const watchdog = setTimeout(() => child.kill('SIGKILL'), 30_000)
  const code = await new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)))
  clearTimeout(watchdog)
  assert.equal(code, 0, `the process did not exit by itself: ${err}`)
  const seen = JSON.parse(out)
  assert.ok(seen.whileOpen.includes('crosslock-rt'), out)
  // The worker's client still open: the runtime runs on.
  assert.ok(seen.afterMainClose.includes('crosslock-rt'), out)
  assert.deepEqual(seen.messages, ['connected', 'used and closed'])
  assert.deepEqual(seen.afterLastClose, [])
  assert.equal(seen.againLocked, true)
  assert.deepEqual(seen.afterSecondClose, [])
})
