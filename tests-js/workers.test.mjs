// worker_threads: each worker is a holder of its own (its own client id), 8 workers exclude each
// other, and terminating a worker cancels its waits and releases what it held.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { describe, test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { channelOf, unique, useRedis, waitUntil, within } from './helpers/util.mjs'

const env = useRedis()

const script = (name) => new URL(`./workers/${name}`, import.meta.url)

function start (name, workerData) {
  const worker = new Worker(script(name), { workerData })
  const messages = []
  worker.on('message', (m) => messages.push(m))
  const failed = new Promise((resolve, reject) => worker.once('error', reject))
  failed.catch(() => {})
  return { worker, messages, failed }
}

describe('worker_threads', () => {
  test('8 workers on a non-atomic GET/SET counter end exact, each with its own client id', async () => {
    const name = unique('workers')
    const key = `${name}:value`
    const rounds = 10
    const workers = Array.from({ length: 8 }, () => start('counter-thread.mjs', { url: env.url, name, key, rounds }))
    const results = await within(
      Promise.all(workers.map(async ({ worker, messages, failed }) => {
        await Promise.race([once(worker, 'exit'), failed])
        return messages[0]
      })),
      30_000,
      'the workers to finish'
    )
    assert.equal(Number(await env.raw.command('GET', key)), 8 * rounds)
    const ids = new Set(results.map((r) => r.id))
    assert.equal(ids.size, 8)
    assert.ok(!ids.has(env.client.id))
    assert.equal(await env.client.lock(name).isLocked(), false)
  })

  test('terminating a worker cancels its pending acquire: no waiter left, and it never takes the lock', async () => {
    const name = unique('terminate-wait')
    const lock = env.client.lock(name)
    const held = await lock.acquire({ lease: 60_000 })
    const { worker, messages, failed } = start('lock-thread.mjs', { url: env.url, name, mode: 'wait' })
    await within(Promise.race([waitUntil(() => messages.length > 0, 'the worker to start waiting'), failed]), 15_000, 'the worker')
    await waitUntil(async () => (await env.raw.numsub(channelOf(name))) === 1, 'the worker to subscribe')
    await worker.terminate()
    await waitUntil(async () => (await env.raw.numsub(channelOf(name))) === 0, 'the terminated waiter to unsubscribe', 5000)
    assert.deepEqual(await env.raw.hgetall(name), { [held.holder]: '1' })
    await held.release()
    const again = await lock.tryAcquire()
    assert.ok(again, 'the lock is free: the terminated worker did not take it')
    assert.deepEqual(await env.raw.hgetall(name), { [again.holder]: '1' })
    await again.release()
    assert.ok(!messages.some((m) => m.acquired))
  })

  test('terminating a worker releases the lock it held (long before its 60 s lease)', async () => {
    const name = unique('terminate-hold')
    const { worker, messages, failed } = start('lock-thread.mjs', { url: env.url, name, mode: 'hold' })
    await within(Promise.race([waitUntil(() => messages.length > 0, 'the worker to hold the lock'), failed]), 15_000, 'the worker')
    const { id, holder } = messages[0]
    assert.notEqual(id, env.client.id)
    assert.deepEqual(await env.raw.hgetall(name), { [holder]: '1' })
    const pttl = await env.raw.command('PTTL', name)
    assert.ok(pttl > 50_000, `lease ≈ 60 s: ${pttl}`)
    await worker.terminate()
    await waitUntil(async () => (await env.raw.command('EXISTS', name)) === 0, 'the lock to be released', 5000)
    const mine = await env.client.lock(name).tryAcquire()
    assert.ok(mine)
    await mine.release()
  })
})
