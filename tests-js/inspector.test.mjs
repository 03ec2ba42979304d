// The inspector from Node: client.inspect / client.scan and the crosslock command
// (bindings-node/dist/cli.js, what `npx crosslock` runs) against a real server, with locks held
// by this process and by a Python process.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import { startRedis } from './helpers/redis-server.mjs'
import { startCluster } from './helpers/cluster.mjs'
import { startSentinelGroup } from './helpers/sentinel.mjs'
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
  const me = seen.holders[0].process
  assert.deepEqual([me.language, me.pid, me.host, me.name], ['js', process.pid, '127.0.0.1', `crosslock-js-${process.pid}-${client.id.replace(/-/g, '').slice(0, 8)}`])
  assert.ok(me.address.startsWith('127.0.0.1:'), me.address)
  assert.ok(seen.ttl > 20000 && seen.ttl <= 30000, String(seen.ttl))
  const ledger = await client.inspect('insp:ledger')
  assert.deepEqual([ledger.kind, ledger.token, ledger.holders.length], ['fenced_lock', 1, 0])
  const catalog = await client.inspect('insp:catalog')
  assert.equal(catalog.mode, 'write')
  assert.equal(catalog.holders[0].clientId, pythonId)
  assert.equal(catalog.holders[0].write, true)
  assert.equal(catalog.holders[0].process.language, 'py')
  assert.ok(catalog.holders[0].process.name.endsWith(pythonId.replace(/-/g, '').slice(0, 8)))
  assert.equal((await client.inspect('insp:nothing')).kind, 'absent')
  assert.deepEqual(await client.scan('insp:*'), ['insp:catalog', 'insp:ledger', 'insp:orders'])
  await assert.rejects(client.scan(''), (e) => e.code === 'INVALID_ARGUMENT')
  await assert.rejects(client.inspect(''), (e) => e.code === 'INVALID_ARGUMENT')

  let run = cli('inspect', 'insp:catalog')
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout, /read write lock, write mode/)
  assert.ok(run.stdout.includes(`writer ${pythonId}`), run.stdout)
  assert.ok(run.stdout.includes(`Python pid ${catalog.holders[0].process.pid} on 127.0.0.1`), run.stdout)
  // The Python CLI's grammar too: options before the command.
  run = spawnSync(process.execPath, [CLI, '--json', 'inspect', 'insp:orders', '--url', env.server.url], { encoding: 'utf8', timeout: 60000 })
  assert.equal(JSON.parse(run.stdout).holders[0].process.language, 'js')
  run = cli('inspect', 'insp:orders', '--json')
  assert.equal(JSON.parse(run.stdout).holders[0].holds, 2)
  assert.equal(cli('inspect', 'insp:nothing').status, 1)
  // Only what is recognisably ours by default; --all shows an app's keys too.
  await raw.command('SET', 'insp:app-counter', '7')
  run = cli('list', 'insp:*')
  assert.deepEqual(run.stdout.trim().split('\n').map((l) => l.split('\t').slice(0, 2)),
    [['insp:catalog', 'read_write_lock'], ['insp:ledger', 'fenced_lock'], ['insp:orders', 'lock']])
  run = cli('list', 'insp:*', '--all')
  assert.deepEqual(run.stdout.trim().split('\n').map((l) => l.split('\t').slice(0, 2)),
    [['insp:app-counter', 'counter'], ['insp:catalog', 'read_write_lock'], ['insp:ledger', 'fenced_lock'], ['insp:orders', 'lock']])
  await raw.command('DEL', 'insp:app-counter')
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

/** `crosslock watch NAME --json` in a child process; its lines read as they come. */
function watchProcess(name) {
  const child = spawn(process.execPath, [CLI, '--url', env.server.url, 'watch', name, '--json', '--interval', '0.05'], {
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const lines = []
  let buffered = ''
  let stderr = ''
  child.stdout.on('data', (d) => {
    buffered += d
    const parts = buffered.split('\n')
    buffered = parts.pop()
    lines.push(...parts.filter(Boolean).map((l) => JSON.parse(l)))
  })
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  return {
    child,
    exited,
    stderr: () => stderr,
    /** The next event; skips those in `skip`; it must be `event` (by `holder`). */
    async expect(event, holder, skip = []) {
      for (;;) {
        await waitUntil(() => lines.length > 0, `crosslock watch to print ${event}`)
        const e = lines.shift()
        if (skip.includes(e.event)) continue
        assert.equal(e.event, event, JSON.stringify(e))
        if (holder !== undefined) assert.equal(e.holder, holder, JSON.stringify(e))
        return e
      }
    }
  }
}

test('crosslock watch follows Node and Python holders until Ctrl-C', async (t) => {
  const { client } = env
  const watch = watchProcess('w:orders')
  t.after(() => watch.child.kill('SIGKILL'))
  const start = await watch.expect('start')
  assert.equal(start.state.kind, 'absent')

  const lock = client.lock('w:orders')
  const held = await lock.acquire({ owner: 3 })
  const e = await watch.expect('acquired', `${client.id}:3`)
  assert.match(e.detail, /^1 hold, lease/)
  assert.match(e.text, /acquired\s+w:orders/)
  await held.release()
  await watch.expect('released', `${client.id}:3`)

  const python = spawn(PYTHON, [path.join(ROOT, 'tests-py', 'cross', 'py_worker.py'), env.server.url, 'hold', 'w:orders'], {
    stdio: ['pipe', 'pipe', 'inherit']
  })
  t.after(() => python.kill())
  let out = ''
  python.stdout.on('data', (d) => { out += d })
  await waitUntil(() => out.includes('HELD'), 'the Python process to hold the lock')
  const pythonId = /READY (\S+)/.exec(out)[1]
  const theirs = await watch.expect('acquired')
  assert.ok(theirs.holder.startsWith(`${pythonId}:`), theirs.holder)
  python.stdin.write('\n')
  await watch.expect('released', theirs.holder)

  watch.child.kill('SIGINT')
  assert.equal(await watch.exited, 0, watch.stderr())
})

test('client.watch is an async iterator that ends when closed', async () => {
  const { client } = env
  const latch = client.countDownLatch('w:gate')
  const watch = await client.watch('w:gate', { interval: 50 })
  assert.equal(watch.initial.kind, 'absent')
  assert.equal(await latch.trySetCount(2), true)
  const seen = []
  for await (const e of watch) {
    seen.push([e.event, e.detail, e.state.count])
    if (seen.length === 1) await latch.countDown()
    else break
  }
  assert.deepEqual(seen, [['count', 'none → 2', 2], ['count', '2 → 1', 1]])
  assert.equal(await watch.next(), null, 'the loop\'s exit closed the watch')
  await assert.rejects(client.watch('w:gate', { interval: 1 }), { code: 'INVALID_ARGUMENT' })

  // close() ends a loop that is waiting for a change.
  const idle = await client.watch('w:idle', { interval: 50 })
  const loop = (async () => { for await (const _ of idle) return 'an event'; return 'ended' })()
  setTimeout(() => idle.close(), 100)
  assert.equal(await loop, 'ended')
})

test('clientName names every connection; a bad one is refused', async () => {
  const named = await crosslock.connect(env.server.url, { clientName: 'orders-api' })
  try {
    const name = `orders-api-js-${process.pid}-${named.id.replace(/-/g, '').slice(0, 8)}`
    const held = await named.lock('insp:named').acquire()
    await waitUntil(async () => String(await env.raw.command('CLIENT', 'LIST')).includes(name), 'the connection named')
    assert.equal((await env.client.inspect('insp:named')).holders[0].process.name, name)
    await held.release()
  } finally {
    await named.close()
  }
  for (const bad of ['two words', '', 'x'.repeat(65)]) {
    await assert.rejects(crosslock.connect(env.server.url, { clientName: bad }), (e) => e.code === 'INVALID_ARGUMENT' && /client_name/.test(e.message))
  }
  await assert.rejects(crosslock.connect(env.server.url, { clientName: 7 }), (e) => e.code === 'INVALID_ARGUMENT')
})

for (const [topology, start] of [['Sentinel', startSentinelGroup], ['Cluster', startCluster]]) {
  test(`the holder's process is named behind ${topology}`, async () => {
    const deployment = await start()
    const holder = await crosslock.connect(deployment.url, { connectTimeout: 8000 })
    const other = await crosslock.connect(deployment.url, { connectTimeout: 8000 })
    try {
      for (const name of ['insp:a', 'insp:b', 'insp:c', 'insp:d']) {
        const held = await holder.lock(name).acquire()
        const p = (await other.inspect(name)).holders[0].process
        assert.ok(p, `no process for ${name}`)
        assert.deepEqual([p.language, p.pid], ['js', process.pid])
        assert.ok(p.name.endsWith(holder.id.replace(/-/g, '').slice(0, 8)), p.name)
        await held.release()
      }
    } finally {
      await holder.close()
      await other.close()
      await deployment.stop()
    }
  })
}
