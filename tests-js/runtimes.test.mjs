// How the JavaScript thread's lanes are watched on the runtime that runs this file (Node, Bun or
// Deno: `./dev test` runs it under each): a `uv_poll` where the runtime's libuv is real, a thread of
// crosslock's runtime that wakes JavaScript through its completion queue where it is not, chosen by
// a self-test rather than by the runtime's name; `CROSSLOCK_NODE_WATCHER=thread` picks the latter
// anywhere, and calls work on it.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { promisify } from 'node:util'

import { native, runScript, unique, useRedis } from './helpers/util.mjs'

const env = useRedis()

/** The runtime's libuv is Node's own (Bun's and Deno's are stand-ins whose `uv_poll` fails). */
const realLibuv = !globalThis.Bun && !globalThis.Deno

/** Runs `source` as an ES module on this runtime, with `extra` added to its environment. */
async function runHere (source, extra) {
  const dir = await mkdtemp(join(tmpdir(), 'crosslock-runtime-'))
  const file = join(dir, 'child.mjs')
  await writeFile(file, source)
  try {
    const args = [...runScript, file]
    const { stdout } = await promisify(execFile)(process.execPath, args, {
      env: { ...process.env, ...extra },
      timeout: 60_000
    })
    return stdout.trim()
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

describe('runtimes', () => {
  test('the lanes are watched by libuv where it is real, by a runtime thread elsewhere', () => {
    const forced = process.env.CROSSLOCK_NODE_WATCHER === 'thread'
    assert.equal(native.laneWatcher(), realLibuv && !forced ? 'libuv' : 'thread')
  })

  test('a burst of calls in flight together, and pairs in a row, each settle with their own reply', async () => {
    const names = Array.from({ length: 64 }, () => unique('burst'))
    const held = await Promise.all(names.map((n) => env.client.lock(n).acquire({ wait: 5000 })))
    assert.deepEqual(await Promise.all(names.map((n) => env.raw.command('EXISTS', n))), names.map(() => 1))
    await Promise.all(held.map((h) => h.release()))
    const lock = env.client.lock(unique('pairs'))
    for (let i = 0; i < 200; i++) {
      const h = await lock.acquire({ wait: 5000 })
      await h.release()
    }
    assert.equal(await env.raw.command('EXISTS', lock.name), 0)
  })

  test('CROSSLOCK_NODE_WATCHER=thread picks the runtime thread, and calls work on it', async () => {
    const source = `
      import { createRequire } from 'node:module'
      const require = createRequire(${JSON.stringify(import.meta.url)})
      const native = require('../bindings-node/native.js')
      const { connect } = require('../')
      const client = await connect(${JSON.stringify(env.url)})
      const lock = client.lock(${JSON.stringify(unique('forced'))})
      for (let i = 0; i < 20; i++) await (await lock.acquire({ wait: 5000 })).release()
      const both = await Promise.all([client.lock('a:' + lock.name).acquire(), client.lock('b:' + lock.name).acquire()])
      await Promise.all(both.map((h) => h.release()))
      await client.close()
      console.log(native.laneWatcher(), 'ok')
    `
    assert.equal(await runHere(source, { CROSSLOCK_NODE_WATCHER: 'thread' }), 'thread ok')
  })
})
