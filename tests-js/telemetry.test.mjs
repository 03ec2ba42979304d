// connect(url, { metrics }): a client's waits, holds, losses, wake-ups, renewals and subscriptions
// as OpenTelemetry metrics, read back through @opentelemetry/sdk-metrics' MeterProvider and a
// reader collected on demand: names, units, attributes and values; names only with
// metricsWithNames; nothing without metrics; close() recording everything before it returns.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { metrics as otel } from '@opentelemetry/api'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'

import { channelOf, crosslock, native, unique, useRedis, waitUntil } from './helpers/util.mjs'

const env = useRedis()

/** A reader collected when the test asks. */
class Reader extends MetricReader {
  async onForceFlush () {}
  async onShutdown () {}
}

function sdk () {
  const reader = new Reader()
  const provider = new MeterProvider({ readers: [reader] })
  return { provider, reader }
}

const key = (attributes) => JSON.stringify(Object.entries(attributes).sort())
const attrs = (kv) => key(Object.fromEntries(Object.entries(kv).map(([k, v]) => [`crosslock.${k}`, v])))

/** Every instrument read: its unit and, per attribute set, a sum's value or a histogram's {count, sum}. */
async function points (reader) {
  const out = {}
  const { resourceMetrics } = await reader.collect()
  for (const sm of resourceMetrics.scopeMetrics) {
    for (const m of sm.metrics) {
      const values = {}
      for (const p of m.dataPoints) {
        values[key(p.attributes)] = typeof p.value === 'number' ? p.value : { count: p.value.count, sum: p.value.sum }
      }
      out[m.descriptor.name] = { unit: m.descriptor.unit, values }
    }
  }
  return out
}

/** Waits until `check(points)` is truthy, and returns the points. */
async function waitForPoints (reader, check, what) {
  let last
  await waitUntil(async () => check(last = await points(reader)), what)
  return last
}

const LOCK = { 'object.type': 'lock' }

describe('metrics', () => {
  test('the instruments are core\'s table', () => {
    const table = native.telemetryInstruments()
    assert.equal(table[0].name, 'crosslock.lock.wait.duration')
    assert.equal(table[0].kind, 'histogram')
    assert.equal(table[0].unit, 's')
    assert.ok(table[0].bounds.length > 0)
    assert.deepEqual(table[0].attributes, ['crosslock.object.type', 'crosslock.outcome'])
    assert.ok(table.some((i) => i.name === 'crosslock.watchdog.renewals' && i.kind === 'counter'))
  })

  test('a wait that times out, a contended acquire woken by message, a force-unlocked hold, renewal rounds, an expired lease, subscriptions back to 0', async () => {
    const { provider, reader } = sdk()
    const client = await crosslock.connect(env.url, { watchdogTimeout: 600, metrics: provider })
    const name = unique('metrics')
    const theirs = await env.client.lock(name).acquire()
    const lock = client.lock(name)
    await assert.rejects(lock.acquire({ wait: 50 }), crosslock.LockTimeoutError)
    const waiting = lock.acquire({ wait: 30_000 })
    await waitForPoints(reader, (p) => p['crosslock.lock.waiters']?.values[attrs(LOCK)] === 1, 'the waiter counted')
    await waitUntil(async () => (await env.raw.command('PUBSUB', 'NUMSUB', channelOf(name)))[1] === 1, 'the waiter subscribed')
    await theirs.release() // its message wakes the waiter
    const held = await waiting

    let p = await waitForPoints(reader, (p) => p['crosslock.lock.wait.duration']?.values[attrs({ ...LOCK, outcome: 'acquired' })], 'the acquire counted')
    assert.equal(p['crosslock.lock.wait.duration'].unit, 's')
    assert.equal(p['crosslock.lock.wait.duration'].values[attrs({ ...LOCK, outcome: 'timeout' })].count, 1)
    assert.equal(p['crosslock.lock.wait.duration'].values[attrs({ ...LOCK, outcome: 'acquired' })].count, 1)
    assert.deepEqual(p['crosslock.lock.waiters'], { unit: '{waiter}', values: { [attrs(LOCK)]: 0 } })
    assert.equal(p['crosslock.wait.wakeups'].unit, '{wakeup}')
    assert.ok(p['crosslock.wait.wakeups'].values[attrs({ 'wake.cause': 'message' })] >= 1)
    assert.equal(p['crosslock.lock.held'].values[attrs(LOCK)], 1)

    // The watchdog renews the hold (every 200 ms here): counted by what it found.
    p = await waitForPoints(reader, (p) => p['crosslock.watchdog.renewals']?.values[attrs({ 'renewal.outcome': 'renewed' })] >= 1, 'a renewal round')
    assert.equal(p['crosslock.watchdog.renewals'].unit, '{hold}')
    assert.ok(p['crosslock.watchdog.renewal.duration'].values[key({})].count >= 1)

    // Lost to a force-unlock: counted by reason, the hold ended by loss.
    assert.equal(await env.client.lock(name).forceUnlock(), true)
    await waitUntil(() => held.lost, 'the renewal to find the hold gone')
    p = await waitForPoints(reader, (p) => p['crosslock.lock.lost']?.values[attrs({ ...LOCK, 'lost.reason': 'gone' })] === 1, 'the loss counted')
    assert.equal(p['crosslock.lock.lost'].unit, '{hold}')
    assert.equal(p['crosslock.lock.hold.duration'].values[attrs({ ...LOCK, 'hold.end': 'lost' })].count, 1)
    assert.equal(p['crosslock.lock.held'].values[attrs(LOCK)], 0)
    assert.ok(p['crosslock.watchdog.renewals'].values[attrs({ 'renewal.outcome': 'gone' })] >= 1)

    // A lease that runs out: lost as expired.
    const leased = await client.lock(unique('leased')).acquire({ lease: 200 })
    await waitUntil(() => leased.lost, 'the lease to run out')
    p = await waitForPoints(reader, (p) => p['crosslock.lock.lost']?.values[attrs({ ...LOCK, 'lost.reason': 'expired' })] === 1, 'the expiry counted')
    assert.equal(p['crosslock.lock.lost'].values[attrs({ ...LOCK, 'lost.reason': 'gone' })], 1)
    assert.equal(p['crosslock.lock.hold.duration'].values[attrs({ ...LOCK, 'hold.end': 'lost' })].count, 2)
    assert.equal(p['crosslock.lock.held'].values[attrs(LOCK)], 0)

    await client.close()
    p = await points(reader)
    assert.equal(p['crosslock.pubsub.subscriptions'].unit, '{subscription}')
    assert.equal(p['crosslock.pubsub.subscriptions'].values[key({})], 0)
    await provider.shutdown()
  })

  test('close() records every measurement made before it; names only with metricsWithNames', async () => {
    const { provider, reader } = sdk()
    const named = await crosslock.connect(env.url, { metrics: provider, metricsWithNames: true })
    const plain = await crosslock.connect(env.url, { metrics: provider })
    const a = unique('named')
    const b = unique('plain')
    await (await named.lock(a).acquire()).release()
    await (await plain.lock(b).acquire()).release()
    await named.close()
    await plain.close()
    const p = await points(reader)
    const holds = p['crosslock.lock.hold.duration'].values
    assert.equal(holds[attrs({ ...LOCK, 'hold.end': 'released', 'lock.name': a })].count, 1)
    assert.equal(holds[attrs({ ...LOCK, 'hold.end': 'released' })].count, 1)
    assert.equal(Object.keys(holds).length, 2, 'no name without metricsWithNames')
    await provider.shutdown()
  })

  test('metrics: true records on the global MeterProvider; a client without metrics records nothing', async () => {
    const { provider, reader } = sdk()
    assert.ok(otel.setGlobalMeterProvider(provider))
    try {
      const none = await crosslock.connect(env.url)
      await (await none.lock(unique('none')).acquire()).release()
      await none.close()
      assert.deepEqual(await points(reader), {})
      const global = await crosslock.connect(env.url, { metrics: true })
      await (await global.lock(unique('global')).acquire()).release()
      await global.close()
      const p = await points(reader)
      assert.equal(p['crosslock.lock.hold.duration'].values[attrs({ ...LOCK, 'hold.end': 'released' })].count, 1)
    } finally {
      otel.disable()
      await provider.shutdown()
    }
  })

  test('a bad metrics value is refused with a TypeError saying what to pass', async () => {
    await assert.rejects(crosslock.connect(env.url, { metrics: 'yes' }), (e) => e instanceof TypeError && /MeterProvider/.test(e.message))
    await assert.rejects(crosslock.connect(env.url, { metrics: {} }), TypeError)
    await assert.rejects(crosslock.connect(env.url, { metrics: true, metricsWithNames: 1 }), TypeError)
  })
})
