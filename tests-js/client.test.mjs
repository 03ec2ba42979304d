// crosslock.Client from Node: what close() (and Symbol.asyncDispose) does to the client's holds,
// connections and pending calls, a client collected or a process ended without close(), and a
// pending acquire keeping its process alive.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { channelOf, crosslock, exposedGc, runScript, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const { RedisUnavailableError } = crosslock

const env = useRedis()

/** The ids of the server's normal connections (`CLIENT LIST`). */
async function connectionIds () {
  return new Set((await env.raw.clients()).keys())
}

describe('close', () => {
  test('Client[Symbol.asyncDispose] closes: holds released, pending acquires rejected', async () => {
    const client = await crosslock.connect(env.url)
    const name = unique('clientdispose')
    const busy = unique('busy')
    const held = await client.lock(name).acquire()
    const blocker = await env.client.lock(busy).acquire()
    const blocked = client.lock(busy).acquire().then(() => assert.fail('acquired'), (e) => e)
    await waitUntil(async () => (await env.raw.numsub(channelOf(busy))) === 1, 'the waiter to subscribe')
    await client[Symbol.asyncDispose]()
    assert.equal(client.closed, true)
    assert.equal(held.released, true)
    assert.ok((await blocked) instanceof RedisUnavailableError)
    assert.equal(await env.raw.command('EXISTS', name), 0)
    assert.deepEqual(await env.raw.hgetall(busy), { [blocker.holder]: '1' })
    await waitUntil(async () => (await env.raw.numsub(channelOf(busy))) === 0, 'the waiter to unsubscribe', 5000)
    await assert.rejects(client.lock(name).acquire(), RedisUnavailableError)
    await blocker.release()
  })

  test('close() closes every connection of the client, its lanes too, while the object lives', async () => {
    const before = await connectionIds()
    const client = await crosslock.connect(env.url)
    const lock = client.lock(unique('closeconns'))
    for (let i = 0; i < 200; i++) { // in quick succession: this thread gets a lane
      const held = await lock.acquire()
      await held.release()
    }
    const ours = [...await connectionIds()].filter((id) => !before.has(id))
    assert.ok(ours.length >= 2, `the command connection and the lane, at least: ${ours}`)
    await client.close()
    await waitUntil(async () => {
      const now = await connectionIds()
      return ours.every((id) => !now.has(id))
    }, 'the closed client\'s connections to go', 10000)
    assert.equal(client.closed, true)
  })

  test('a client collected without close() closes its connections and stops renewing: its locks expire', async () => {
    const gc = exposedGc()
    const before = await connectionIds()
    const name = unique('collectedclient')
    // Nothing made in here is kept but the client and its hold, in `box.kept`: not its locks.
    // (The hold is kept while the renewal is watched: a hold collected while held is released,
    // see leaked_hold.test.mjs, and a runtime that collects early would take the lock away
    // first.) Every await while the client lives is in the inner function: under Bun, an await
    // in this frame while it had the client in hand kept the client reachable from the frame
    // after `box.kept = null` (JavaScriptCore's suspended frame held on to it).
    const box = {}
    const ours = await (async () => {
      const client = await crosslock.connect(env.url, { watchdogTimeout: 600 })
      const lock = client.lock(`${name}:pairs`)
      for (let i = 0; i < 200; i++) { // in quick succession: this thread gets a lane
        const held = await lock.acquire()
        await held.release()
      }
      box.kept = { client, held: await client.lock(name).acquire() }
      const ours = [...await connectionIds()].filter((id) => !before.has(id))
      assert.ok(ours.length >= 2, `the command connection and the lane, at least: ${ours}`)
      // While the client lives, its watchdog renews the lock: its PTTL goes back up.
      let last = Infinity
      await waitUntil(async () => {
        const pttl = await env.raw.command('PTTL', name)
        const renewed = pttl > last
        last = pttl
        return renewed
      }, 'a renewal of the lock while the client lives', 5000)
      assert.equal(client.closed, false)
      return ours
    })()
    box.kept = null
    await waitUntil(async () => {
      gc()
      await sleep(20)
      const now = await connectionIds()
      return ours.every((id) => !now.has(id))
    }, 'the collected client\'s connections to go', 10000)
    await waitUntil(async () => (await env.raw.command('EXISTS', name)) === 0,
      'its lock to go (a collected hold is released; renewal stopped in any case)', 5000)
  })
})

describe('the process', () => {
  test('a process that ends without close() releases its locks on the way out', async () => {
    const name = unique('exit')
    const script = fileURLToPath(new URL('./workers/hold-process.mjs', import.meta.url))
    const child = spawn(process.execPath, [...runScript, script, env.url, name, '30000', 'exit'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    const [code] = await within(once(child, 'exit'), 15_000, 'the child to exit')
    assert.equal(code, 0)
    assert.match(out, /^held /)
    // Node and Bun release from the addon's clean-up hook; Deno, which runs none when a process
    // ends, from the process's 'exit' event (lib/client.ts).
    assert.equal(await env.raw.command('EXISTS', name), 0, 'released at exit, not left for its 30 s lease')
  })

  test('a pending acquire keeps the process alive until it settles (nothing else on the event loop)', async () => {
    const name = unique('alive')
    const held = await env.client.lock(name).acquire()
    const script = fileURLToPath(new URL('./workers/hold-process.mjs', import.meta.url))
    const child = spawn(process.execPath, [...runScript, script, env.url, name, '30000', 'exit'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    const exited = once(child, 'exit')
    await waitUntil(async () => (await env.raw.numsub(channelOf(name))) === 1, 'the child to wait for the lock')
    assert.equal(child.exitCode, null, 'the child is still waiting (a pending promise keeps its event loop alive)')
    await held.release()
    const [code] = await within(exited, 15_000, 'the child to take the lock and exit')
    assert.equal(code, 0, 'exit code 13 would mean the event loop ended with the acquire unsettled')
    assert.match(out, /^held /)
  })
})
