// Input: no credential of any URL form in an error (message, stack, util.inspect, toString), a
// log line (NODE_DEBUG=crosslock) or a CLI message; every limit of core's table refused before
// anything is sent, null and non-integers included; a database index no Redis has is an invalid
// argument; a release on another kind's key is WRONG_TYPE (core/tests/alone/input.rs has the whole
// matrix, tests-py/test_input.py the same cases for Python).
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createRequire } from 'node:module'
import { after, before, describe, test } from 'node:test'

import { startRedis } from './helpers/redis-server.mjs'
import { crosslock, useRedis } from './helpers/util.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const SECRET = 's3cr3t'

async function closedPort () {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Every URL form with its credentials, each failing to connect in its own way. */
function secretUrls (live, closed) {
  return [
    `redis://default:${SECRET}-a@127.0.0.1:${live}/0`,
    `redis://app:${SECRET}-b@127.0.0.1:${closed}/0`,
    `redis://${SECRET}-c@127.0.0.1:${closed}/0`,
    `redis://:${SECRET}-d@127.0.0.1:${live}/99999999999`,
    `redis://:${SECRET}-e@127.0.0.1:${live}/0?protocol=9`,
    `redis://:pa/${SECRET}-g@127.0.0.1:${closed}/0`,
    `redis://:pa?${SECRET}-h@127.0.0.1:${closed}/0`,
    `rediss://:${SECRET}-i@127.0.0.1:${closed}/0#${SECRET}-frag`,
    `${SECRET}-j@127.0.0.1:${closed}`,
    `redis+unix:///nonexistent/r.sock?user=${SECRET}-user&pass=${SECRET}-k`,
    `redis+unix:///nonexistent/r.sock?pass=${SECRET}-l&db=99999999999`,
    `redis+sentinel://app:${SECRET}-m@127.0.0.1:${closed}/m?sentinel_username=${SECRET}-su&sentinel_password=${SECRET}-n`,
    `redis+sentinel://127.0.0.1:${closed}/m?sentinel_password=${SECRET}-o&unknown=1`,
    `redis+sentinel://127.0.0.1:${closed}/m?sentinel_pasword=${SECRET}-p`,
    `redis+sentinel://127.0.0.1:${closed}/m?${SECRET}-q`,
    `redis+sentinel://:${SECRET}-t@127.0.0.1:${closed}/m/99999999999`,
    `redis+cluster://u:${SECRET}-v@127.0.0.1:${closed}?password=${SECRET}-w`,
    `redis+cluster://127.0.0.1:${closed}/5?x=${SECRET}-x`
  ]
}

// Connects to each URL and prints everything a user could print of the error, then runs the CLI
// with it; finally connects through a password and prints the client, and has it reconnect.
const PROGRAM = `
const util = require('node:util')
const { connect } = require(${JSON.stringify(ROOT)})
const { main } = require(${JSON.stringify(path.join(ROOT, 'bindings-node', 'dist', 'cli.js'))})
;(async () => {
  const [good, ...urls] = JSON.parse(process.argv[1])
  for (const url of urls) {
    try {
      await connect(url, { connectTimeout: 500 })
      console.log('CONNECTED ' + url)
    } catch (e) {
      console.log(String(e), e.stack, util.inspect(e), JSON.stringify(e), e.code)
    }
    const status = await main(['--url', url, 'inspect', 'x'], (line) => console.log(line))
    if (status !== 2) console.log('CLI STATUS ' + status)
  }
  try { await connect(Buffer.from(urls[0])) } catch (e) { console.log(String(e)) }
  const client = await connect(good)
  console.log(String(client), util.inspect(client), client.address)
  const held = await client.lock('secrets').acquire()
  await held.release()
  await client.close()
  console.log('DONE')
})()
`

describe('secrets', () => {
  const env = {}
  before(async () => {
    env.server = await startRedis({ args: ['--requirepass', 'right-password'] })
  })
  after(async () => { await env.server?.stop() })

  test('no credential of any URL form reaches an error, a log line, inspect/toString or the CLI', async () => {
    const good = `redis://default:right-password@127.0.0.1:${env.server.port}/0`
    const urls = secretUrls(env.server.port, await closedPort())
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['-e', PROGRAM, JSON.stringify([good, ...urls])], {
      env: { ...process.env, NODE_DEBUG: 'crosslock' },
      timeout: 120_000,
      maxBuffer: 16 << 20
    })
    assert.match(stdout, /DONE/)
    assert.doesNotMatch(stdout, /CONNECTED|CLI STATUS/)
    const text = stdout + stderr
    const leaks = text.split('\n').filter((l) => l.includes(SECRET) || l.includes('right-password'))
    assert.deepEqual(leaks, [], 'credentials shown')
    assert.match(stderr, /crosslock: /, 'the CLI said why')
    assert.match(stderr, /CROSSLOCK \d+:/, 'NODE_DEBUG logged')
  })
})

describe('arguments', () => {
  const env = useRedis()

  const scriptCalls = async () => {
    const info = await env.raw.command('INFO', 'commandstats')
    let calls = 0
    for (const line of info.split('\r\n')) {
      if (line.startsWith('cmdstat_eval')) calls += Number(line.split('calls=')[1].split(',')[0])
    }
    return calls
  }

  // Core's table, as the native module hands it to the TypeScript checks.
  const native = createRequire(import.meta.url)('../bindings-node/native.js')
  const LIMITS = new Map(native.limits().map((l) => [l.name, l]))
  const lo = (name) => LIMITS.get(name).min - 1
  const hi = (name) => LIMITS.get(name).max + 1

  // The calls with values just outside each limit of core's table, and of no whole number at all.
  const cases = (c) => {
    const sem = c.semaphore('limits:sem')
    const pes = c.permitExpirableSemaphore('limits:pes')
    const latch = c.countDownLatch('limits:latch')
    const lock = c.lock('limits:lock')
    const connect = (options, db = 0) => crosslock.connect(env.url.replace(/\/0$/, `/${db}`), options)
    return {
      permits: [lo('permits'), hi('permits'), null, 1.5, '1'].map((n) => [`release(${n})`, () => sem.release(n)]),
      permits_set: [lo('permits_set'), hi('permits_set'), null, undefined, 1.5, '1'].flatMap((n) => [
        [`sem.trySetPermits(${n})`, () => sem.trySetPermits(n)],
        [`pes.trySetPermits(${n})`, () => pes.trySetPermits(n)],
        // In an options object null and undefined are the default (1), as for every option.
        ...(n === null || n === undefined ? [] : [[`sem.acquire({ permits: ${n} })`, () => sem.acquire({ permits: n })]])
      ]),
      permit_delta: [lo('permit_delta'), hi('permit_delta'), null, undefined, 2.5, '1', 2 ** 53].flatMap((n) => [
        [`sem.addPermits(${n})`, () => sem.addPermits(n)],
        [`pes.addPermits(${n})`, () => pes.addPermits(n)]
      ]),
      latch_count: [lo('latch_count'), hi('latch_count'), null, 1.5].map((n) => [`trySetCount(${n})`, () => latch.trySetCount(n)]),
      db: [lo('db'), hi('db')].map((n) => [`connect(…/${n})`, () => connect({}, n)]),
      watchdog_batch: [lo('watchdog_batch'), hi('watchdog_batch'), 1.5, '1'].map((n) => [`watchdogBatchSize: ${n}`, () => connect({ watchdogBatchSize: n })]),
      replicas: [lo('replicas'), hi('replicas'), 1.5].map((n) => [`waitForReplicas: ${n}`, () => connect({ waitForReplicas: n })]),
      scan_limit: [lo('scan_limit'), hi('scan_limit'), 1.5].map((n) => [`scan limit ${n}`, () => c.scan('*', { limit: n })]),
      lease_ms: [0, hi('lease_ms') + 1000].map((n) => [`lease ${n}`, () => lock.acquire({ lease: n })]),
      duration_ms: [hi('duration_ms') + 1000].map((n) => [`wait ${n}`, () => lock.acquire({ wait: n })])
    }
  }

  test('every limit of core\'s table has a case', () => {
    assert.deepEqual([...LIMITS.keys()].sort(), Object.keys(cases(env.client)).sort())
  })

  for (const name of ['permits', 'permits_set', 'permit_delta', 'latch_count', 'db', 'watchdog_batch', 'replicas', 'scan_limit', 'lease_ms', 'duration_ms']) {
    test(`${name}: refused before anything is sent`, async () => {
      const before = await scriptCalls()
      const wrong = []
      for (const [what, call] of cases(env.client)[name]) {
        try {
          const result = await call()
          wrong.push(`${what}: resolved ${result}`)
        } catch (e) {
          if (e.code !== 'INVALID_ARGUMENT') wrong.push(`${what}: ${e.code} ${e.message}`)
        }
      }
      assert.deepEqual(wrong, [])
      assert.equal(await scriptCalls(), before, 'a refused call ran a script')
      assert.deepEqual(await env.raw.command('KEYS', '*'), [])
    })
  }

  test('a fair-lock release on a read-write lock, and a permit release on a lock, are WRONG_TYPE and change nothing', async () => {
    const other = await env.connect()
    await other.readWriteLock('mix:rw').readLock().acquire()
    await other.lock('mix:lock').acquire()
    const dump = async () => {
      const keys = (await env.raw.command('KEYS', '*')).sort()
      return Promise.all(keys.map(async (k) => [k, String(await env.raw.command('DUMP', k))]))
    }
    const before = await dump()
    await assert.rejects(env.client.fairLock('mix:rw').release({ owner: 1 }), (e) => e.code === 'WRONG_TYPE' && /read-write lock/.test(e.message))
    await assert.rejects(env.client.permitExpirableSemaphore('mix:lock').release('0123456789abcdef0123456789abcdef'), (e) => e.code === 'WRONG_TYPE' && !/script:|user_script/.test(e.message))
    await assert.rejects(env.client.semaphore('mix:lock').release(), (e) => e.code === 'WRONG_TYPE' && /holds a hash, not/.test(e.message))
    assert.deepEqual(await dump(), before)
  })
})
