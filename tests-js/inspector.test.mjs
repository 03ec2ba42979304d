// The inspector from Node: client.inspect / client.scan and the crosslock command
// (bindings-node/dist/cli.js, what `npx crosslock` runs) against a real server, with locks held
// by this process and by a Python process.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { crosslock, waitUntil } from './helpers/util.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const CLI = path.join(ROOT, 'bindings-node', 'dist', 'cli.js')
const PYTHON = path.join(ROOT, '.venv', 'bin', 'python')

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
  env.client = await crosslock.connect(env.server.url)
})
after(async () => {
  await env.client?.close()
  await env.raw?.close()
  await env.server?.stop()
})

const cli = (...args) => spawnSync(process.execPath, [CLI, '--url', env.server.url, ...args], { encoding: 'utf8', timeout: 60000 })

test('inspect, scan and the command line see Node and Python holders', async (t) => {
  const { client, raw } = env
  const held = await client.lock('insp:orders').withLock(async () => {
    // re-entered inside the scope: two holds of one owner
    return await client.lock('insp:orders').acquire()
  }, { owner: 7 }).catch((e) => e)
  assert.ok(!(held instanceof Error), String(held))
  const mine = await client.lock('insp:orders').acquire({ owner: 7 })
  const fenced = await client.fencedLock('insp:ledger').acquire()
  await fenced.release()
  const python = spawn(PYTHON, [path.join(ROOT, 'tests-py', 'cross', 'py_worker.py'), env.server.url, 'hold', 'insp:catalog'], {
    env: { ...process.env, CROSSLOCK_KIND: 'write_lock' }, stdio: ['pipe', 'pipe', 'inherit']
  })
  t.after(() => python.kill())
  let out = ''
  python.stdout.on('data', (d) => { out += d })
  await waitUntil(() => out.includes('HELD'), 'the Python process to hold the write lock')
  const pythonId = /READY (\S+)/.exec(out)[1]

  const seen = await client.inspect('insp:orders')
  assert.equal(seen.kind, 'lock')
  assert.deepEqual(seen.holders.map((h) => [h.holder, h.clientId, h.holds, h.write]), [[`${client.id}:7`, client.id, 2, false]])
  assert.ok(seen.ttl > 20000 && seen.ttl <= 30000, String(seen.ttl))
  const ledger = await client.inspect('insp:ledger')
  assert.deepEqual([ledger.kind, ledger.token, ledger.holders.length], ['fenced_lock', 1, 0])
  const catalog = await client.inspect('insp:catalog')
  assert.equal(catalog.mode, 'write')
  assert.equal(catalog.holders[0].clientId, pythonId)
  assert.equal(catalog.holders[0].write, true)
  assert.equal((await client.inspect('insp:nothing')).kind, 'absent')
  assert.deepEqual(await client.scan('insp:*'), ['insp:catalog', 'insp:ledger', 'insp:orders'])
  await assert.rejects(client.scan(''), (e) => e.code === 'INVALID_ARGUMENT')
  await assert.rejects(client.inspect(''), (e) => e.code === 'INVALID_ARGUMENT')

  let run = cli('inspect', 'insp:catalog')
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout, /read write lock, write mode/)
  assert.ok(run.stdout.includes(`writer ${pythonId}`), run.stdout)
  run = cli('inspect', 'insp:orders', '--json')
  assert.equal(JSON.parse(run.stdout).holders[0].holds, 2)
  assert.equal(cli('inspect', 'insp:nothing').status, 1)
  run = cli('list', 'insp:*')
  assert.deepEqual(run.stdout.trim().split('\n').map((l) => l.split('\t').slice(0, 2)),
    [['insp:catalog', 'read_write_lock'], ['insp:ledger', 'fenced_lock'], ['insp:orders', 'lock']])
  run = cli('force-unlock', 'insp:catalog', '--yes')
  assert.equal(run.status, 0, run.stderr)
  assert.ok(run.stdout.includes(pythonId), run.stdout)
  assert.equal(await raw.command('EXISTS', 'insp:catalog'), 0)
  assert.equal(cli('bogus').status, 2)

  await mine.release()
  await held.release()
  assert.equal(await raw.command('EXISTS', 'insp:orders'), 0)
})

test('the command says when the server cannot be reached', () => {
  const run = spawnSync(process.execPath, [CLI, '--url', 'redis://127.0.0.1:1/0', 'list'], { encoding: 'utf8', timeout: 60000 })
  assert.equal(run.status, 2)
  assert.match(run.stderr, /127\.0\.0\.1:1/)
})
