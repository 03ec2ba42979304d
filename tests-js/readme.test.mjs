// The README's Node example runs as written (against a throwaway server instead of 6379).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'

const README = new URL('../README.md', import.meta.url)

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

test("the README's Node tour runs and leaves no lock behind", async () => {
  const server = await startRedis()
  try {
    const code = nodeBlock()
    assert.ok(code.includes("require('crosslock')") && code.includes('redis://127.0.0.1:6379/0'))
    const source = code.replace('redis://127.0.0.1:6379/0', server.url)
    const AsyncFunction = (async () => {}).constructor
    const require = (id) => createRequire(import.meta.url)(id === 'crosslock' ? '../' : id)
    // Run it twice: the first run must have released everything it took (no hang, no leftover).
    await new AsyncFunction('require', source)(require)
    await new AsyncFunction('require', source)(require)
    const raw = await RawRedis.connect(server.url)
    try {
      assert.equal(await raw.command('EXISTS', 'orders:42'), 0)
    } finally {
      raw.close()
    }
  } finally {
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
    const req = createRequire(import.meta.url)
    const require = (id) => req(id === 'crosslock' ? '../' : id)
    const client = await require('crosslock').connect(server.url)
    try {
      const AsyncFunction = (async () => {}).constructor
      await new AsyncFunction('client', 'require', blocks[2])(client, require)
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
