// A HeldLock garbage-collected while still held, when only it could release the lock (an acquire
// outside an owner scope, withLock's own hold): a warning on the debug log names the lock, the
// holder and where it was acquired; a watchdog hold is released, a lease hold left to expire.
// Holds that an owner scope or an explicit owner can still release are left alone. The child runs
// with --expose-gc, which node --test cannot pass to a test file.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { waitUntil } from './helpers/util.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
})
after(async () => {
  await env.raw?.close()
  await env.server?.stop()
})

// Each leak is made in a function of its own that returns: no frame left running keeps its
// HeldLock. `STOP` on stdin ends the collecting; the child then checks the holds it kept.
const PROGRAM = `
const { connect, runAsOwner, currentOwner } = require(${JSON.stringify(ROOT)})
;(async () => {
  const client = await connect(process.argv[1])
  async function leakWatchdogHold () { await client.lock('leak:watchdog').acquire() }
  async function leakLeaseHold () { await client.lock('leak:lease').acquire({ lease: 60_000 }) }
  async function leakExtendedHold () { const held = await client.lock('leak:extended').acquire(); await held.extend(60_000) }
  async function abandonWithLock () {
    let entered
    const inside = new Promise((resolve) => { entered = resolve })
    client.lock('leak:scope').withLock(async () => { entered(); await new Promise(() => {}) })
    await inside
  }
  async function holdInScope () {
    return runAsOwner(async () => { await client.lock('leak:owned').acquire(); return currentOwner() })
  }
  async function holdAsOwner (owner) { await client.lock('leak:explicit').acquire({ owner }) }
  await leakWatchdogHold()
  await leakLeaseHold()
  await leakExtendedHold()
  await abandonWithLock()
  const owner = await holdInScope()
  await holdAsOwner(owner)
  const kept = await client.lock('leak:kept').acquire()
  console.log('HELD')
  let stop = false
  process.stdin.on('data', () => { stop = true })
  while (!stop) {
    globalThis.gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
  if (kept.released || kept.lost) throw new Error('a hold still referenced was touched')
  await kept.release()
  await client.lock('leak:owned').release({ owner })
  await client.lock('leak:explicit').release({ owner })
  await client.close()
  console.log('CLEAN')
})().catch((e) => { console.error(e); process.exit(1) })
`

test('a HeldLock collected while held is reported; a watchdog hold is released, a lease hold left to expire', async () => {
  const child = spawn(process.execPath, ['--expose-gc', '-e', PROGRAM, env.server.url], {
    env: { ...process.env, NODE_DEBUG: 'crosslock' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { err += d })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  try {
    await waitUntil(() => out.includes('HELD') || child.exitCode !== null, 'the child to hold its locks')
    assert.ok(out.includes('HELD'), err)
    const warning = (name) => err.split('\n').find((l) => l.includes(`warn: lock '${name}' was still held`))
    await waitUntil(() => warning('leak:watchdog') && warning('leak:lease') && warning('leak:extended') && warning('leak:scope'),
      `the four leaked-hold warnings in:\n${err}`)
    // The watchdog holds are released (just after the warning), the lease holds left to expire.
    await waitUntil(async () => (await env.raw.command('EXISTS', 'leak:watchdog', 'leak:scope')) === 0,
      'the leaked watchdog holds released')
    for (const name of ['leak:lease', 'leak:extended']) {
      assert.equal(await env.raw.command('EXISTS', name), 1, `${name} left to its lease`)
      assert.ok(await env.raw.command('PTTL', name) > 30_000, `${name} keeps its 60 s lease`)
    }

    const w = warning('leak:watchdog')
    assert.match(w, new RegExp(`^CROSSLOCK ${child.pid}: warn: lock 'leak:watchdog' was still held \\(1 time\\(s\\), as [0-9a-f-]{36}:\\d+\\) ` +
      `when its HeldLock was garbage-collected; it was acquired at \\[eval\\]:\\d+:\\d+\\. Releasing it: release every hold before ` +
      `dropping it \\(held\\.release\\(\\), lock\\.withLock\\(\\) or await using\\)$`), err)
    // The call site is the program's own line that acquired (line 5 of the -e program).
    assert.match(w, /acquired at \[eval\]:5:/, w)
    assert.match(warning('leak:lease'), /Leaving it to expire after its lease: /, err)
    assert.match(warning('leak:extended'), /Leaving it to expire after its lease: /, err)
    assert.match(warning('leak:scope'), /Releasing it: /, err)
    assert.match(warning('leak:scope'), /acquired at \[eval\]:11:/, err)

    // Holds an owner can still release by number, and the one kept, are left alone.
    for (const name of ['leak:owned', 'leak:explicit', 'leak:kept']) {
      assert.ok(!err.includes(`'${name}'`), `${name} is not reported:\n${err}`)
      assert.equal(await env.raw.command('EXISTS', name), 1, `${name} still held`)
    }
    child.stdin.end('STOP\n')
    assert.equal(await exited, 0, err)
    assert.ok(out.includes('CLEAN'), out + err)
  } finally {
    child.kill()
  }
})
