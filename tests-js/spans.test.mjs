// connect(url, { spans }): a client's acquires as OpenTelemetry spans, read back through
// @opentelemetry/sdk-trace-base's in-memory exporter: a crosslock.acquire span under the span
// active where the call was made (concurrent calls each under their own), with its outcome,
// attempts and wait, an EVALSHA client span per script call under it; releases and watchdog rounds
// at the 'all' level only; names opt-in; nothing without spans; bad options refused.
import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'

import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'

import { crosslock, unique, useRedis, waitUntil } from './helpers/util.mjs'

const env = useRedis()
const manager = new AsyncLocalStorageContextManager().enable()
context.setGlobalContextManager(manager)
after(() => { context.disable() })

function sdk () {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  return { provider, exporter, tracer: provider.getTracer('test') }
}

const named = (spans, name) => spans.filter((s) => s.name === name)
const childrenOf = (spans, parent) => spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)
const ns = ([s, n]) => BigInt(s) * 1_000_000_000n + BigInt(n)

describe('spans', () => {
  test('an acquire is a span under the caller\'s with its script calls under it', async () => {
    const { provider, exporter, tracer } = sdk()
    const client = await env.connect({ spans: provider })
    const port = Number(new URL(env.url).port)
    const [contended, free, busy] = [unique('contended'), unique('free'), unique('busy')]
    // Held elsewhere for 300 ms: the acquire waits, and tries again when the lease ends.
    await env.client.lock(contended).acquire({ lease: 300 })
    const theirs = await env.client.lock(busy).acquire()
    const request = tracer.startSpan('request')
    await context.with(trace.setSpan(context.active(), request), async () => {
      await (await client.lock(contended).acquire({ wait: 5000 })).release()
      await (await client.lock(free).acquire()).release()
      await assert.rejects(client.lock(busy).acquire({ wait: 50 }), crosslock.LockTimeoutError)
    })
    request.end()
    await theirs.release()
    await client.close() // hands over every span before it resolves
    const spans = exporter.getFinishedSpans()
    const acquires = named(spans, 'crosslock.acquire')
    assert.equal(acquires.length, 3, spans.map((s) => s.name).join(', '))
    for (const acquire of acquires) {
      assert.equal(acquire.parentSpanContext?.spanId, request.spanContext().spanId)
      assert.equal(acquire.spanContext().traceId, request.spanContext().traceId)
      assert.equal(acquire.kind, 0) // INTERNAL
      assert.equal(acquire.attributes['crosslock.object.type'], 'lock')
      assert.equal(acquire.attributes['crosslock.lock.name'], undefined)
      const calls = childrenOf(spans, acquire)
      assert.ok(acquire.attributes['crosslock.attempts'] >= 1)
      assert.equal(calls.length, acquire.attributes['crosslock.attempts'])
      for (const call of calls) {
        assert.equal(call.name, 'EVALSHA lock/acquire')
        assert.equal(call.kind, 2) // CLIENT
        assert.deepEqual({ ...call.attributes }, {
          'db.system.name': 'redis',
          'db.operation.name': 'EVALSHA',
          'crosslock.script': 'lock/acquire',
          'server.address': '127.0.0.1',
          'server.port': port,
        })
        assert.ok(ns(acquire.startTime) <= ns(call.startTime) && ns(call.endTime) <= ns(acquire.endTime))
      }
    }
    const [waited, untroubled, timedOut] = acquires
    assert.equal(waited.attributes['crosslock.outcome'], 'acquired')
    assert.ok(waited.attributes['crosslock.attempts'] >= 2, JSON.stringify(waited.attributes))
    assert.ok(waited.attributes['crosslock.wait.seconds'] >= 0.2)
    assert.equal(untroubled.attributes['crosslock.attempts'], 1)
    assert.equal(timedOut.attributes['crosslock.outcome'], 'timeout')
    // At the default level a release is no span, nor are its script calls.
    assert.deepEqual(named(spans, 'crosslock.release'), [])
    assert.deepEqual(named(spans, 'EVALSHA lock/release'), [])
  })

  test('concurrent calls are each under the span active where they were made', async () => {
    const { provider, exporter, tracer } = sdk()
    const client = await env.connect({ spans: provider, spansWithNames: true })
    const parents = {}
    await Promise.all([0, 1, 2, 3].map((n) => tracer.startActiveSpan(`task ${n}`, async (span) => {
      const name = unique(`jobs-${n}`)
      parents[name] = span.spanContext().spanId
      const held = await client.lock(name).acquire()
      await new Promise((resolve) => setTimeout(resolve, 10))
      await held.release()
      span.end()
    })))
    await client.close()
    const acquires = named(exporter.getFinishedSpans(), 'crosslock.acquire')
    assert.equal(acquires.length, 4)
    for (const acquire of acquires) {
      const name = acquire.attributes['crosslock.lock.name']
      assert.equal(acquire.parentSpanContext?.spanId, parents[name], name)
    }
  })

  test('at the all level, releases and watchdog rounds are spans too', async () => {
    const { provider, exporter } = sdk()
    const client = await env.connect({ watchdogTimeout: 1500, spans: provider, spansLevel: 'all' })
    const held = await client.lock(unique('watched')).acquire()
    // A round every half second renews the watched hold.
    const renewedOne = () => named(exporter.getFinishedSpans(), 'crosslock.renewal')
      .find((s) => s.attributes['crosslock.renewal.renewed'] === 1)
    await waitUntil(renewedOne, 'a watchdog round\'s span')
    await held.release()
    await client.close()
    const spans = exporter.getFinishedSpans()
    const round = renewedOne()
    assert.equal(round.parentSpanContext, undefined)
    assert.deepEqual(childrenOf(spans, round).map((s) => s.name), ['EVALSHA renewal/hash'])
    const [release] = named(spans, 'crosslock.release')
    assert.equal(release.attributes['crosslock.object.type'], 'lock')
    assert.deepEqual(childrenOf(spans, release).map((s) => s.name), ['EVALSHA lock/release'])
  })

  test('without spans none is made, and bad options are refused', async () => {
    const { provider, exporter, tracer } = sdk()
    const client = await env.connect({})
    await tracer.startActiveSpan('request', async (span) => {
      await (await client.lock(unique('plain')).acquire()).release()
      span.end()
    })
    assert.deepEqual(exporter.getFinishedSpans().map((s) => s.name), ['request'])
    await assert.rejects(crosslock.connect(env.url, { spans: provider, spansLevel: 'some' }),
      (e) => e instanceof crosslock.InvalidArgumentError && /spansLevel must be 'acquires'/.test(e.message))
    await assert.rejects(crosslock.connect(env.url, { spans: {} }),
      (e) => e instanceof TypeError && /TracerProvider/.test(e.message))
    await assert.rejects(crosslock.connect(env.url, { spans: provider, spansWithNames: 'yes' }),
      (e) => e instanceof TypeError && /spansWithNames must be a boolean/.test(e.message))
  })
})
