// Logging from Node: nothing by default; with NODE_DEBUG=crosslock, reconnects, lost locks and
// subscription changes on stderr in util.debuglog's format, never a password.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { waitUntil } from './helpers/util.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const PASSWORD = 's3cret-pw'

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
  await env.raw.command('CONFIG', 'SET', 'requirepass', PASSWORD)
})
after(async () => {
  await env.raw?.close()
  await env.server?.stop()
})

// A process that holds a lock (watchdog 1.5 s) with a waiter subscribed, until told the lock is lost.
const PROGRAM = `
const { connect } = require(${JSON.stringify(ROOT)})
;(async () => {
  const url = process.argv[1]
  const client = await connect(url, { watchdogTimeout: 1500 })
  const other = await connect(url)
  const held = await client.lock('log:orders').acquire()
  const waiting = other.lock('log:orders').acquire({ wait: 300 }).catch(() => 'timed out')
  console.log(await waiting)
  console.log('HELD')
  const alive = setInterval(() => {}, 1000) // an AbortSignal listener keeps no process alive
  await new Promise((resolve) => held.signal.addEventListener('abort', resolve))
  clearInterval(alive)
  await client.close()
  await other.close()
  console.log('LOST')
})()
`

async function run (extraEnv) {
  const child = spawn(process.execPath, ['-e', PROGRAM, `redis://:${PASSWORD}@127.0.0.1:${env.server.port}/0`], {
    env: { ...process.env, NODE_DEBUG: '', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { err += d })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  await waitUntil(() => out.includes('HELD'), 'the child to hold the lock')
  await env.raw.command('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
  await env.raw.command('CLIENT', 'KILL', 'TYPE', 'pubsub')
  await new Promise((resolve) => setTimeout(resolve, 300))
  await env.raw.command('DEL', 'log:orders')
  assert.equal(await exited, 0, err)
  assert.ok(out.includes('LOST'), out)
  return { pid: child.pid, err }
}

test('NODE_DEBUG=crosslock reports subscriptions, reconnects and lost locks, without the password', async () => {
  const { pid, err } = await run({ NODE_DEBUG: 'net,crosslock' })
  const address = `127.0.0.1:${env.server.port}`
  const lines = err.split('\n').filter(Boolean)
  const has = (re) => lines.some((l) => re.test(l))
  assert.ok(has(new RegExp(`^CROSSLOCK ${pid}: debug: subscribed to redisson_lock__channel:\\{log:orders\\}$`)), err)
  assert.ok(has(new RegExp(`^CROSSLOCK ${pid}: warn: command connection to ${address} lost`)), err)
  assert.ok(has(new RegExp(`^CROSSLOCK ${pid}: warn: subscription connection to ${address} lost`)), err)
  assert.ok(has(new RegExp(`^CROSSLOCK ${pid}: warn: lock 'log:orders' lost by \\S+: a renewal found it gone`)), err)
  assert.ok(!err.includes(PASSWORD), 'a debug line carries the password')
})

test('without NODE_DEBUG nothing is printed', async () => {
  const { err } = await run({})
  assert.equal(err, '')
})
