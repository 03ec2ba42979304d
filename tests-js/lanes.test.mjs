// The JavaScript thread's own round trips ("lanes"): an uncontended call makes its round trip over
// a connection that thread's libuv loop watches. Whatever happens to that connection, callers see
// what they would see on the shared one: no error after the server killed connections, none after
// an idle timeout, each of many concurrent promises gets its own reply, worker threads leave no
// connections behind, and a reply lost on a lane never leaves a hold behind.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { crosslock, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const env = useRedis()

async function pairs (lock, n) {
  for (let i = 0; i < n; i++) {
    const held = await lock.acquire({ wait: 5000 })
    await held.release()
  }
}

async function normalClients (raw) {
  return (await raw.clients()).size
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

describe('lanes', () => {
  test('calls right after the server killed every connection succeed', async () => {
    const name = unique('lanes-killed')
    const lock = env.client.lock(name)
    for (let i = 0; i < 5; i++) {
      await pairs(lock, 3)
      await env.raw.command('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      await pairs(lock, 3)
    }
    assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('calls after an idle timeout succeed', async () => {
    const server = await startRedis({ args: ['--timeout', '1'] })
    const client = await crosslock.connect(server.url)
    try {
      const lock = client.lock(unique('lanes-idle'))
      for (let i = 0; i < 2; i++) {
        await pairs(lock, 3)
        await sleep(1300)
      }
      await pairs(lock, 3)
    } finally {
      await client.close()
      await server.stop()
    }
  })

  test('forty concurrent promises on one lane each get their own reply', async () => {
    const other = await env.connect()
    const names = Array.from({ length: 40 }, () => unique('lanes-c'))
    const busy = []
    for (let i = 0; i < 40; i += 2) busy.push(await other.lock(names[i]).acquire())
    await pairs(env.client.lock(names[1]), 3)
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(names.map(async (name) => {
        const held = await env.client.lock(name).tryAcquire()
        if (held === null) return [false, 0]
        const count = await env.client.lock(name).holdCount({ owner: held.owner })
        await held.release()
        return [true, count]
      }))
      assert.deepEqual(results, names.map((_, i) => (i % 2 === 0 ? [false, 0] : [true, 1])))
    }
    for (const held of busy) await held.release()
    for (const name of names) assert.equal(await env.raw.command('EXISTS', name), 0)
  })

  test('worker threads that come and go leave no connections behind', async () => {
    const before = await normalClients(env.raw)
    const code = `
      const { workerData, parentPort } = require('node:worker_threads')
      const crosslock = require(workerData.module)
      ;(async () => {
        const client = await crosslock.connect(workerData.url)
        const lock = client.lock(workerData.name)
        for (let i = 0; i < 30; i++) { const held = await lock.acquire({ wait: 5000 }); await held.release() }
        await client.close()
        parentPort.postMessage('done')
      })().catch((e) => { parentPort.postMessage(String(e)) })
    `
    const module = new URL('../', import.meta.url).pathname
    for (let round = 0; round < 3; round++) {
      const outcomes = await within(Promise.all(Array.from({ length: 4 }, (_, i) => new Promise((resolve, reject) => {
        const worker = new Worker(code, { eval: true, workerData: { url: env.url, name: unique(`lanes-w${i}`), module } })
        worker.once('message', resolve)
        worker.once('error', reject)
      }))), 30_000, 'the workers')
      assert.deepEqual(outcomes, ['done', 'done', 'done', 'done'])
    }
    await waitUntil(async () => (await normalClients(env.raw)) <= before, 'the workers\' connections to close')
  })

  test('a client closed while its lane is still unused leaves no connection behind', async () => {
    // Calls in quick succession open a lane in the background; until the loop's next call takes
    // it, it waits in the loop. This thread's loop lives on after the client closes, and so did
    // that connection, one more on the server for every client closed so.
    const before = await normalClients(env.raw)
    for (let round = 0; round < 3; round++) {
      const client = await crosslock.connect(env.url)
      try {
        const lock = client.lock(unique('lanes-unused'))
        await pairs(lock, 1) // connects, runs the scripts the usual way (their first runs do)
        const connected = await normalClients(env.raw)
        await pairs(lock, 1) // asks for a lane twice in quick succession: one opens
        await waitUntil(async () => (await normalClients(env.raw)) > connected, 'a lane to open')
      } finally {
        await client.close()
      }
      await waitUntil(async () => (await normalClients(env.raw)) === before, 'every connection of the closed client to close')
    }
  })

  test('an acquire whose reply is lost holds the lock once or not at all', async () => {
    const server = await startRedis()
    const client = await crosslock.connect(server.url, { responseTimeout: 300 })
    const raw = await RawRedis.connect(server.url)
    try {
      const name = unique('lanes-lost')
      const lock = client.lock(name)
      for (let i = 0; i < 3; i++) {
        await pairs(lock, 3)
        server.signal('SIGSTOP')
        const resume = setTimeout(() => server.signal('SIGCONT'), 600)
        let held = null
        try {
          held = await lock.acquire({ wait: 10_000 })
        } catch (e) {
          assert.equal(e.code, 'UNAVAILABLE', String(e))
        } finally {
          await sleep(700)
          clearTimeout(resume)
          server.signal('SIGCONT')
        }
        if (held !== null) {
          assert.equal(await lock.holdCount({ owner: held.owner }), 1)
          await held.release()
        }
        await waitUntil(async () => (await raw.command('EXISTS', name)) === 0, 'no hold left behind', 5000)
      }
    } finally {
      await raw.close()
      await client.close()
      await server.stop()
    }
  })

  for (const lanes of ['none', 'sync', 'all']) {
    test(`lanes: '${lanes}' ${lanes === 'all' ? 'opens connections' : 'opens no connection'} beyond the client's usual ones for a burst of calls`, async () => {
      // Node has no blocking callers: 'sync' opens no lane here, like 'none'.
      const client = await crosslock.connect(env.server.url, { lanes })
      try {
        // connect() opened the client's usual connections; no call has asked for a lane yet.
        const usual = await normalClients(env.raw)
        const lock = client.lock(unique('lanes-switch'))
        const deadline = Date.now() + (lanes === 'all' ? 10_000 : 1000)
        let opened = false
        while (!opened && Date.now() < deadline) {
          await pairs(lock, 50)
          await sleep(50)
          opened = (await normalClients(env.raw)) > usual
        }
        assert.equal(opened, lanes === 'all')
      } finally {
        await client.close()
      }
    })
  }

  test('a bad lanes value is refused, naming the allowed ones', async () => {
    for (const bad of ['off', 'ALL', '']) {
      await assert.rejects(crosslock.connect(env.server.url, { lanes: bad }), (e) =>
        e instanceof RangeError && e.code === 'INVALID_ARGUMENT' && /'all', 'sync', 'none'/.test(e.message))
    }
    await assert.rejects(crosslock.connect(env.server.url, { lanes: 7 }), (e) =>
      e instanceof TypeError && e.code === 'INVALID_ARGUMENT' && /lanes/.test(e.message))
  })
})
