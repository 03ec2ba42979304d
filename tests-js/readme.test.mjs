// The README's Node example runs as written (against a throwaway server instead of 6379).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'

const README = new URL('../README.md', import.meta.url)
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

function nodeBlock () {
  const text = readFileSync(README, 'utf8')
  const section = text.split('\n## Node.js')[1].split('\n## ')[0]
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
  assert.ok(blocks.length >= 1, "the README's Node section lost its example")
  return blocks[0]
}

test("the README's Node lock-type tour runs and leaves nothing but the fencing counter", async () => {
  const server = await startRedis()
  try {
    const text = readFileSync(README, 'utf8')
    const section = text.split('\n## Node.js')[1].split('\n## ')[0]
    const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
    assert.ok(blocks.length >= 2, "the README's Node section lost its lock-type examples")
    const { connect } = createRequire(import.meta.url)('../')
    const client = await connect(server.url)
    try {
      const AsyncFunction = (async () => {}).constructor
      await new AsyncFunction('client', blocks[1])(client)
    } finally {
      await client.close()
    }
    const raw = await RawRedis.connect(server.url)
    try {
      assert.deepEqual(await raw.command('KEYS', '*'), ['redisson_lock_token:{ledger}'])
    } finally {
      raw.close()
    }
  } finally {
    await server.stop()
  }
})

test("the README's Node tour runs as written, as an ES module file importing 'crosslock'", async () => {
  const server = await startRedis()
  const dir = mkdtempSync(path.join(tmpdir(), 'crosslock-readme-'))
  try {
    const code = nodeBlock()
    assert.ok(code.includes("import { connect } from 'crosslock'") && code.includes('redis://127.0.0.1:6379/0'))
    // A project of its own whose node_modules/crosslock is this checkout, as after npm install.
    mkdirSync(path.join(dir, 'node_modules'))
    symlinkSync(ROOT, path.join(dir, 'node_modules', 'crosslock'), 'dir')
    writeFileSync(path.join(dir, 'tour.mjs'), code.replace('redis://127.0.0.1:6379/0', server.url))
    // Run it twice: the first run must have released everything it took (no hang, no leftover).
    for (let i = 0; i < 2; i++) {
      const run = spawnSync(process.execPath, ['tour.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60000 })
      assert.equal(run.status, 0, run.stderr)
    }
    const raw = await RawRedis.connect(server.url)
    try {
      assert.equal(await raw.command('EXISTS', 'orders:42'), 0)
    } finally {
      raw.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await server.stop()
  }
})

test("the README's Node synchronizer tour runs and gives every permit back", async () => {
  const server = await startRedis()
  try {
    const text = readFileSync(README, 'utf8')
    const section = text.split('\n## Node.js')[1].split('\n## ')[0]
    const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
    assert.ok(blocks.length >= 3, "the README's Node section lost its synchronizer examples")
    assert.ok(blocks[2].includes('semaphore') && blocks[2].includes('MultiLock'))
    const { connect, MultiLock } = createRequire(import.meta.url)('../')
    const client = await connect(server.url)
    try {
      const AsyncFunction = (async () => {}).constructor
      await new AsyncFunction('client', 'MultiLock', blocks[2])(client, MultiLock)
    } finally {
      await client.close()
    }
    const raw = await RawRedis.connect(server.url)
    try {
      assert.equal(await raw.command('GET', 'renderers'), '3')
      assert.equal(await raw.command('GET', 'licenses'), '2')
      assert.deepEqual((await raw.command('KEYS', '*')).sort(), ['licenses', 'renderers'])
    } finally {
      raw.close()
    }
  } finally {
    await server.stop()
  }
})
