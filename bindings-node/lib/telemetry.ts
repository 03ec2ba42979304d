/**
 * A client's waits, holds, renewals, subscriptions and connections as OpenTelemetry metrics:
 * `connect(url, { metrics: true })` (`@opentelemetry/api`'s global MeterProvider) or
 * `connect(url, { metrics: provider })`. Core measures; the native module hands the measurements
 * here in batches, on the client's thread (bindings-node/src/telemetry.rs), and this module records
 * them on instruments made from core's table (`telemetryInstruments()`). Nothing is measured
 * without `metrics`, and `@opentelemetry/api` is loaded only then.
 */

import native = require('../native')
import { invalidArgument } from './errors'

/** The attribute an object's name goes under (`metricsWithNames: true`). */
const LOCK_NAME = 'crosslock.lock.name'

/**
 * What `metrics` takes besides `true`: an OpenTelemetry `MeterProvider` (`@opentelemetry/api`'s
 * interface, e.g. `@opentelemetry/sdk-metrics`' `MeterProvider`), typed by its shape so that the
 * package's types are needed only by those who use it.
 */
export interface MetricsMeterProvider {
  getMeter(name: string, version?: string, options?: object): unknown
}

type Attributes = Record<string, string>
type Record_ = (value: number, attributes: Attributes) => void

interface MeterLike {
  createHistogram(name: string, options: object): { record(value: number, attributes?: Attributes): void }
  createCounter(name: string, options: object): { add(value: number, attributes?: Attributes): void }
  createUpDownCounter(name: string, options: object): { add(value: number, attributes?: Attributes): void }
}

/** The instruments of one client, made from core's table, as the functions that record on them. */
function instruments (meter: MeterLike): Record_[] {
  return native.telemetryInstruments().map((i) => {
    const options = { unit: i.unit, description: i.description }
    switch (i.kind) {
      case 'histogram': {
        const h = meter.createHistogram(i.name, { ...options, advice: { explicitBucketBoundaries: i.bounds } })
        return (v, a) => h.record(v, a)
      }
      case 'counter': {
        const c = meter.createCounter(i.name, options)
        return (v, a) => c.add(v, a)
      }
      case 'up_down_counter': {
        const u = meter.createUpDownCounter(i.name, options)
        return (v, a) => u.add(v, a)
      }
      default:
        throw new Error(`crosslock: unknown instrument kind ${String(i.kind)} for ${i.name}`)
    }
  })
}

/** The version of this package, for the meter's name. */
function version (): string | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('../../package.json') as { version?: string }).version
  } catch {
    return undefined
  }
}

/**
 * What records the measurements of a client connected with `metrics`: `undefined` when nothing
 * is to be measured (`undefined`, `null` or `false`), the global MeterProvider's instruments for
 * `true`, the given MeterProvider's otherwise.
 */
export function sink (metrics: unknown): ((batch: native.TelemetryMeasurement[]) => void) | undefined {
  if (metrics === undefined || metrics === null || metrics === false) return undefined
  const provider = metrics === true
    ? load<{ metrics: { getMeterProvider(): unknown } }>('metrics', 'records OpenTelemetry metrics', 'sdk-metrics').metrics.getMeterProvider()
    : metrics
  checkProvider(provider, 'metrics', 'MeterProvider', 'getMeter')
  const record = instruments((provider as MetricsMeterProvider).getMeter('crosslock', version()) as MeterLike)
  return (batch) => {
    for (const m of batch) {
      const attributes: Attributes = {}
      const pairs = m.attributes
      for (let k = 0; k + 1 < pairs.length; k += 2) attributes[pairs[k]!] = pairs[k + 1]!
      if (m.name !== undefined && m.name !== null) attributes[LOCK_NAME] = m.name
      record[m.instrument]!(m.value, attributes)
    }
  }
}

/**
 * What `spans` takes besides `true`: an OpenTelemetry `TracerProvider` (`@opentelemetry/api`'s
 * interface, e.g. `@opentelemetry/sdk-trace-base`'s `BasicTracerProvider`), typed by its shape.
 */
export interface SpansTracerProvider {
  getTracer(name: string, version?: string, options?: object): unknown
}

/** The values of `spansLevel`. */
export const SPAN_LEVELS = ['acquires', 'all'] as const

interface SpanLike {
  setStatus(status: { code: number, message?: string }): unknown
  end(endTime?: [number, number]): void
}

interface TracerLike {
  startSpan(name: string, options: object, context: unknown): SpanLike
}

interface TraceApi {
  context: { active(): unknown }
  trace: { getTracerProvider(): unknown, setSpan(context: unknown, span: SpanLike): unknown }
  ROOT_CONTEXT: unknown
  SpanKind: { INTERNAL: number, CLIENT: number }
  SpanStatusCode: { ERROR: number }
}

/** `@opentelemetry/api`, once a client makes spans. */
let traceApi: TraceApi | undefined

/** The active contexts where calls were made while spans were on, by the number `capture` gave. */
const contexts = new Map<number, unknown>()
let lastContext = 0

/**
 * @internal Keeps the active OpenTelemetry context under a new number, the parent of the spans
 * of the call being made, and forgets the contexts numbered `forgotten` (no span can name them
 * any more). Called by the native module as a call is made, while a client makes spans.
 */
export function capture (forgotten: number[]): number {
  for (const id of forgotten) contexts.delete(id)
  lastContext = (lastContext % 0xffff_ffff) + 1
  contexts.set(lastContext, traceApi!.context.active())
  return lastContext
}

/** Makes `span` (and its children) on `tracer`, inside `inside` or its call's context. */
function replay (api: TraceApi, tracer: TracerLike, span: native.TelemetrySpan, inside?: unknown): void {
  const context = inside ?? (span.parent != null ? contexts.get(span.parent) : undefined) ?? api.ROOT_CONTEXT
  const attributes: Record<string, string | number> = {}
  span.attributeKeys.forEach((key, k) => { attributes[key] = span.attributeValues[k]! })
  const kind = span.kind === 'client' ? api.SpanKind.CLIENT : api.SpanKind.INTERNAL
  const made = tracer.startSpan(span.name, { kind, attributes, startTime: span.start }, context)
  if (span.error != null) made.setStatus({ code: api.SpanStatusCode.ERROR, message: span.error })
  if (span.children.length > 0) {
    const within = api.trace.setSpan(context, made)
    for (const child of span.children) replay(api, tracer, child, within)
  }
  made.end(span.end)
}

/**
 * What replays the spans of a client connected with `spans`: `undefined` when no span is to be
 * made (`undefined`, `null` or `false`), the global TracerProvider's tracer for `true`, the given
 * TracerProvider's otherwise. `@opentelemetry/api` is needed either way: its context is where the
 * caller's span is found.
 */
export function spanSink (spans: unknown): ((batch: native.TelemetrySpan[]) => void) | undefined {
  if (spans === undefined || spans === null || spans === false) return undefined
  const api = load<TraceApi>('spans', 'makes OpenTelemetry spans', 'sdk-trace-base')
  const provider = spans === true ? api.trace.getTracerProvider() : spans
  checkProvider(provider, 'spans', 'TracerProvider', 'getTracer')
  traceApi = api
  const tracer = (provider as SpansTracerProvider).getTracer('crosslock', version()) as TracerLike
  return (batch) => {
    for (const span of batch) replay(api, tracer, span)
  }
}

/** `@opentelemetry/api`, for `connect(url, { <option> })`, which `does` with it: an error saying what to install without it. */
function load<T> (option: string, does: string, sdk: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@opentelemetry/api') as T
  } catch {
    throw new Error(
      `crosslock: connect(url, { ${option} }) ${does} and needs the ` +
      '@opentelemetry/api package: npm install @opentelemetry/api (and an SDK, e.g. ' +
      `@opentelemetry/${sdk}, to export them)`)
  }
}

/** Refuses, as `option`, anything but an object shaped as a `kind` (one with a `method`). */
function checkProvider (provider: unknown, option: string, kind: string, method: string): void {
  if (typeof provider !== 'object' || provider === null || typeof (provider as Record<string, unknown>)[method] !== 'function') {
    throw invalidArgument('type', `${option} must be true (OpenTelemetry's global ${kind}), false, or a ${kind}, got ${provider === null ? 'null' : typeof provider}`)
  }
}
