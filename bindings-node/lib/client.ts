/**
 * {@link Client}: one connection to a Redis deployment, with its own client id.
 *
 * @module
 */
import { debuglog } from 'node:util'

import native = require('../native')
import { type Inspection, LockKind } from '../native'
import { invalidArgument, viaNative } from './errors'
import { FairLock, NonReentrantFairLock } from './fair_lock'
import { FencedLock } from './fenced_lock'
import { Holds } from './held'
import { Lock } from './lock'
import { optionsObject } from './args'
import { checkWhole } from './limits'
import { NonReentrantLock } from './non_reentrant_lock'
import { GroupLock } from './group_lock'
import { ReadLock, ReadWriteLock, WriteLock } from './read_write_lock'
import { CountDownLatch } from './count_down_latch'
import { PermitExpirableSemaphore, Permits } from './permit_expirable_semaphore'
import { Semaphore } from './semaphore'
import { SpinLock, type SpinLockOptions } from './spin_lock'
import { Watch } from './watch'
import { capture, sink, spanSink, SPAN_LEVELS, type MetricsMeterProvider, type SpansTracerProvider } from './telemetry'

export type { MetricsMeterProvider, SpansTracerProvider } from './telemetry'

/** Options of {@link Client.groupLock}. */
export interface GroupLockOptions {
  /** How the Java side encodes values: `'kryo5'` (Redisson's default) or `'string'` (`StringCodec`). */
  codec?: 'kryo5' | 'string'
}

/** Whether this thread listens for the process's `'exit'` (see {@link closeAtExit}). */
let closingAtExit = false

/**
 * Closes this thread's unclosed clients when the process ends (their locks released, not left
 * for their lease), from the process's `'exit'` event on every runtime. The addon's clean-up hook
 * would do it on Node and Bun (it then finds nothing left); Deno runs none when a process ends.
 */
function closeAtExit (): void {
  if (closingAtExit) return
  closingAtExit = true
  process.on('exit', () => native.closeAtExit())
}

/**
 * Client settings. Durations are milliseconds. A key it does not name is refused with
 * `InvalidArgumentError`, not ignored. A key left out keeps core's default (the one each
 * comment below names; core/tests/house_rules.rs ties them to core's values).
 *
 * @example
 * ```js
 * const client = await connect(url, { connectTimeout: 2000, responseTimeout: 1000, watchdogTimeout: 30_000 })
 * ```
 */
export interface ConnectOptions {
  /** How long connecting may take before `connect()` rejects with `RedisUnavailableError` (default 5000). */
  connectTimeout?: number | undefined
  /** How long one command may take (default 3000). */
  responseTimeout?: number | undefined
  /**
   * The lease of a lock acquired without one, renewed every third of it (default 30000,
   * Redisson's `lockWatchdogTimeout`). Keep it equal across all clients of a lock.
   */
  watchdogTimeout?: number | undefined
  /** How many locks one renewal script renews (default 100). */
  watchdogBatchSize?: number | undefined
  /**
   * How long a `FairLock` waiter that gave no `wait` may take to come back before the others skip
   * it as dead (default 300000, Redisson's `fairLockWaitTimeout`). Keep it equal across all
   * clients of a lock.
   */
  fairLockWaitTimeout?: number | undefined
  /**
   * For a `rediss://` server whose certificate comes from a private CA: the CA certificate(s) in
   * PEM (a string, or a Buffer / Uint8Array such as `fs.readFileSync('ca.pem')`). Default: the web roots.
   */
  tlsCaCert?: string | Uint8Array | undefined
  /**
   * After every acquisition (a lock, a read or write hold, a permit), wait until this many
   * replicas of the master have it (Redis `WAIT`, as Redisson does after its lock scripts).
   * Default: no waiting. When fewer acknowledge within `replicaWaitTimeout`, the acquisition is
   * given back and the call rejects with `RedisUnavailableError` (nothing is left held). It
   * makes an acquisition survive a failover to a replica that had it; renewals and releases are
   * not waited for.
   */
  waitForReplicas?: number | undefined
  /** How long to wait for those replicas, in milliseconds (default 1000). */
  replicaWaitTimeout?: number | undefined
  /**
   * What this process is called in `CLIENT LIST`: every connection is named
   * `<clientName>-js-<pid>-<first 8 hex digits of the client id>` (default `crosslock`), so
   * `crosslock inspect` can name the process behind a holder. 1 to 64 printable ASCII
   * characters without spaces (else `InvalidArgumentError`).
   */
  clientName?: string | undefined
  /**
   * Which calls may make their round trip on a connection of the caller's own (a *lane*, watched
   * by this thread's event loop) instead of handing it to crosslock's runtime thread and back:
   * `'all'` (the default), `'sync'` (blocking callers only, which Node does not have: no lanes
   * here) or `'none'` (every call goes through crosslock's runtime, and the client opens no
   * connection beyond its usual ones, for a tight `maxclients`). Lanes open only while calls
   * come in quick succession, at most 16 per node. Anything else is refused with
   * `InvalidArgumentError`.
   */
  lanes?: 'all' | 'sync' | 'none' | undefined
  /**
   * Record this client's waits, holds, losses, wake-ups, watchdog rounds, subscriptions and
   * connection changes as OpenTelemetry metrics (docs/api.md "Metrics" lists the instruments):
   * `true` for `@opentelemetry/api`'s global MeterProvider (`metrics.getMeterProvider()`), or a
   * `MeterProvider`. `@opentelemetry/api` is an optional peer dependency, loaded only then: without
   * it `connect()` rejects with an error saying `npm install @opentelemetry/api`. Anything but a
   * boolean or a MeterProvider is refused with `InvalidArgumentError` (a `TypeError`). The
   * measurements are queued without waiting and recorded in batches on this thread (never keeping
   * it alive); `close()` records every one made before it. Default: nothing is measured, at no
   * cost.
   */
  metrics?: boolean | MetricsMeterProvider | undefined
  /**
   * Add each lock's name as the attribute `crosslock.lock.name` (one series per name: for a few
   * well-known locks, not for names made per job). Default `false`.
   */
  metricsWithNames?: boolean | undefined
  /**
   * Make OpenTelemetry spans of this client's acquires: a `crosslock.acquire` span per acquire
   * (a child of the span active where it is called; its object type, outcome, attempts and wait)
   * with an `EVALSHA <script>` client span per script call under it (docs/api.md "Spans"):
   * `true` for `@opentelemetry/api`'s global TracerProvider, or a `TracerProvider`. Needs
   * `@opentelemetry/api` (its context finds the caller's span); the spans reach the tracer once
   * ended, with their times, in batches on this thread; `close()` hands over every one. Default:
   * no span is made.
   */
  spans?: boolean | SpansTracerProvider | undefined
  /**
   * `'acquires'` (the default) or `'all'`: releases, watchdog rounds and every other script call
   * get spans too.
   */
  spansLevel?: 'acquires' | 'all' | undefined
  /** Add each lock's name to its spans as `crosslock.lock.name`. Default `false`. */
  spansWithNames?: boolean | undefined
}

/** The keys of {@link ConnectOptions}. */
const CONNECT_KEYS = [
  'connectTimeout',
  'responseTimeout',
  'watchdogTimeout',
  'watchdogBatchSize',
  'fairLockWaitTimeout',
  'tlsCaCert',
  'waitForReplicas',
  'replicaWaitTimeout',
  'clientName',
  'lanes',
  'metrics',
  'metricsWithNames',
  'spans',
  'spansLevel',
  'spansWithNames',
] as const

/** The values of {@link ConnectOptions.lanes}. */
const LANES = ['all', 'sync', 'none'] as const

function checkConnectOptions(options: unknown): native.ConnectOptions {
  const o = optionsObject(options, 'connect()', CONNECT_KEYS)
  const out: native.ConnectOptions = {}
  for (const key of ['connectTimeout', 'responseTimeout', 'watchdogTimeout', 'fairLockWaitTimeout', 'replicaWaitTimeout'] as const) {
    const v = o[key]
    if (v === undefined || v === null) continue
    if (typeof v !== 'number') throw invalidArgument('type', `${key} must be a number of milliseconds, got ${typeof v}`)
    if (!Number.isFinite(v) || v <= 0) throw invalidArgument('range', `${key} must be a finite number of milliseconds > 0, got ${v}`)
    out[key] = v
  }
  const batch = o.watchdogBatchSize
  if (batch !== undefined && batch !== null) {
    out.watchdogBatchSize = checkWhole(batch, 'watchdog_batch', 'watchdogBatchSize')
  }
  const replicas = o.waitForReplicas
  if (replicas !== undefined && replicas !== null) {
    out.waitForReplicas = checkWhole(replicas, 'replicas', 'waitForReplicas (leave it out not to wait)')
  }
  const clientName = o.clientName
  if (clientName !== undefined && clientName !== null) {
    if (typeof clientName !== 'string') throw invalidArgument('type', `clientName must be a string, got ${typeof clientName}`)
    out.clientName = clientName
  }
  const lanes = o.lanes
  if (lanes !== undefined && lanes !== null) {
    if (typeof lanes !== 'string') throw invalidArgument('type', `lanes must be one of 'all', 'sync', 'none', got ${typeof lanes}`)
    if (!(LANES as readonly string[]).includes(lanes)) throw invalidArgument('range', `lanes must be one of 'all', 'sync', 'none', got '${lanes}'`)
    out.lanes = lanes as (typeof LANES)[number]
  }
  const ca = o.tlsCaCert
  if (ca !== undefined && ca !== null) {
    if (typeof ca !== 'string' && !(ca instanceof Uint8Array)) {
      throw invalidArgument('type', `tlsCaCert must be PEM text (a string, a Buffer or a Uint8Array), got ${typeof ca}`)
    }
    out.tlsCaCert = typeof ca === 'string' ? new TextEncoder().encode(ca) : ca
  }
  delete (out as Record<string, unknown>).metrics
  delete (out as Record<string, unknown>).metricsWithNames
  delete (out as Record<string, unknown>).spans
  delete (out as Record<string, unknown>).spansLevel
  delete (out as Record<string, unknown>).spansWithNames
  return out
}

/** The native connect's span options for `connect(url, { spans, spansLevel, spansWithNames })`. */
function spansOf (options: ConnectOptions | undefined): native.SpanOptions | undefined {
  const level = options?.spansLevel ?? 'acquires'
  if (!(SPAN_LEVELS as readonly unknown[]).includes(level)) {
    throw invalidArgument('range', `spansLevel must be 'acquires' (acquires and their script calls) or 'all' (releases, watchdog rounds and every script call too), got ${typeof level === 'string' ? `'${level}'` : typeof level}`)
  }
  const names = options?.spansWithNames ?? false
  if (typeof names !== 'boolean') throw invalidArgument('type', `spansWithNames must be a boolean, got ${typeof names}`)
  const replay = spanSink(options?.spans)
  if (replay === undefined) return undefined
  const onSpans = (batch: native.TelemetrySpan[]) => {
    if (batch.length === 0) return
    try {
      replay(batch)
    } catch (e) {
      process.emitWarning(`crosslock: making spans failed: ${String(e)}`)
    }
  }
  return { onSpans, capture, all: level === 'all', names }
}

/**
 * A connection to one Redis deployment, with its own client id (a UUID v4): the `<client-id>`
 * of the holder strings `<client-id>:<owner>` its locks are stored under. Make one per process
 * (or per worker thread) with `connect()`, and share it.
 *
 * It holds a command connection and one subscription connection shared by every waiter, and
 * renews the locks it holds (the watchdog). `close()` it when done: that cancels pending
 * acquires and releases the locks it still holds. A client does not keep the process alive by
 * itself (a pending acquire does); when the process ends by itself, or its worker thread is
 * terminated, its clients are closed the same way. `process.exit()` skips that clean-up: locks
 * still held then expire after their lease (30 s with the watchdog). A client garbage-collected
 * without `close()` (nothing refers to it, nor to its locks and holds) closes its connections and
 * stops renewing: the locks it still held expire after their lease.
 *
 * @example
 * ```js
 * const { connect } = require('crosslock')
 * const client = await connect('redis://127.0.0.1:6379/0')
 * try {
 *   await client.lock('orders:42').withLock(async () => {
 *     // exclusive work
 *   })
 * } finally {
 *   await client.close()
 * }
 * ```
 */
export class Client implements AsyncDisposable {
  readonly #native: native.Client
  /** What records this client's measurements (`connect` with `metrics`). */
  #record: ((batch: native.TelemetryMeasurement[]) => void) | undefined
  /** What replays this client's spans (`connect` with `spans`). */
  #replay: ((batch: native.TelemetrySpan[]) => void) | undefined

  /** @internal The native client, for the `crosslock` command (lib/cli.ts). */
  get _native(): native.Client {
    return this.#native
  }
  /** @internal Live holds, for lost-lock signals, owner look-ups and `close()`. */
  readonly _holds = new Holds()
  /** @internal Live permits of permit-expirable semaphores, for lost-permit signals. */
  readonly _permits = new Permits()

  /** @internal Clients come from `connect()`. */
  constructor(nativeClient: native.Client) {
    this.#native = nativeClient
  }

  /** @internal */
  static async _connect(url: string, options?: ConnectOptions): Promise<Client> {
    if (typeof url !== 'string' || url === '') {
      throw invalidArgument('type', `connect(url): url must be a non-empty string such as 'redis://127.0.0.1:6379/0', got ${url === '' ? 'an empty string' : typeof url}`)
    }
    const opts = checkConnectOptions(options)
    const withNames = (options as ConnectOptions | undefined)?.metricsWithNames
    if (withNames !== undefined && withNames !== null && typeof withNames !== 'boolean') {
      throw invalidArgument('type', `metricsWithNames must be a boolean, got ${typeof withNames}`)
    }
    const record = sink((options as ConnectOptions | undefined)?.metrics)
    const onMeasurements = record === undefined
      ? undefined
      : (batch: native.TelemetryMeasurement[]) => {
          if (batch.length === 0) return
          try {
            record(batch)
          } catch (e) {
            process.emitWarning(`crosslock: recording metrics failed: ${String(e)}`)
          }
        }
    const spanOptions = spansOf(options as ConnectOptions | undefined)
    if (debuglog('crosslock').enabled) native.enableDebugLog()
    let self: WeakRef<Client> | undefined
    const onLost = (event: native.LostLockEvent) => {
      const client = self?.deref()
      if (event.kind === LockKind.Permit) client?._permits.onLost(event.name, event.holder)
      else client?._holds.onLost(client.id, event.name, event.owner, event.kind)
    }
    const client = new Client(await viaNative(() => native.connect(url, opts, onLost, onMeasurements, withNames === true, spanOptions)))
    client.#record = onMeasurements
    client.#replay = spanOptions?.onSpans
    self = new WeakRef(client)
    closeAtExit()
    return client
  }

  /**
   * This client's id: the `<client-id>` of its holder strings.
   *
   * @example
   * ```js
   * console.log(client.id) // e.g. '5f0c9a4e-…'
   * ```
   */
  get id(): string {
    return this.#native.id
  }

  /**
   * The `host:port` this client connects to.
   *
   * @example
   * ```js
   * console.log(client.address) // '127.0.0.1:6379'
   * ```
   */
  get address(): string {
    return this.#native.address
  }

  /**
   * Whether {@link Client.close} was called.
   *
   * @example
   * ```js
   * await client.close()
   * console.log(client.closed) // true
   * ```
   */
  get closed(): boolean {
    return this.#native.closed
  }

  /**
   * The {@link Lock} named `name` (Redisson's `RLock` of the same name). Cheap: no Redis call.
   * Throws `InvalidArgumentError` (also a `TypeError`) for a non-string or empty name, or one
   * with a lone surrogate (it could not be stored as given).
   *
   * @param name - the lock's key in Redis, e.g. `'orders:42'`
   *
   * @example
   * ```js
   * const lock = client.lock('orders:42')
   * ```
   */
  lock(name: string): Lock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.Lock, name, null))
    return new Lock(this, LockKind.Lock, name)
  }

  /**
   * The {@link FairLock} named `name` (Redisson's `RFairLock`): handed over in the order its
   * waiters asked. Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const lock = client.fairLock('printer')
   * ```
   */
  fairLock(name: string): FairLock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.FairLock, name, null))
    return new FairLock(this, LockKind.FairLock, name)
  }

  /**
   * The {@link SpinLock} named `name` (Redisson's `RSpinLock`): its waiters retry with a
   * back-off (Redisson's by default) instead of subscribing. Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const lock = client.spinLock('jobs', { backoff: { kind: 'constant', initial: 64 } })
   * ```
   */
  spinLock(name: string, options?: SpinLockOptions): SpinLock {
    checkName(name)
    const backoff = checkBackoff(options, name)
    viaNative(() => this.#native.checkLock(LockKind.SpinLock, name, backoff))
    return new SpinLock(this, LockKind.SpinLock, name, backoff)
  }

  /**
   * The {@link FencedLock} named `name` (Redisson's `RFencedLock`): every acquisition gets a
   * strictly increasing `held.token`. Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const held = await client.fencedLock('ledger').acquire()
   * console.log(held.token) // e.g. 42n
   * await held.release()
   * ```
   */
  fencedLock(name: string): FencedLock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.FencedLock, name, null))
    return new FencedLock(this, LockKind.FencedLock, name)
  }

  /**
   * The {@link GroupLock} on `values` of `group` (Redisson's `getMultiLock(group, values)`): all the
   * values or none. Values are strings (as the Java side passes `String`s); at least one, each once.
   * `options.codec` is how the Java side encodes values: `'kryo5'` (Redisson's default
   * `Kryo5Codec`) or `'string'` (`StringCodec`). Throws `InvalidArgumentError` for no values, a
   * value given twice, a non-string value or an unknown codec; group name rules as for
   * {@link Client.lock}.
   *
   * @example
   * ```js
   * const lock = client.groupLock('orders', ['42', '43'])
   * ```
   */
  groupLock(group: string, values: readonly string[], options?: GroupLockOptions): GroupLock {
    checkName(group)
    if (!Array.isArray(values)) {
      throw invalidArgument(
        'type',
        `values of group lock '${group}' must be an array of strings, got ${typeof values}` +
          (typeof values === 'string' ? `; write ['${values}'] to lock one value` : ''),
        group,
      )
    }
    for (const value of values) {
      if (typeof value !== 'string') {
        throw invalidArgument(
          'type',
          `values of group lock '${group}' must be strings (as the Java side passes String values), ` +
            `got ${typeof value} ${String(value)}; convert it with String()`,
          group,
        )
      }
    }
    const codec = options?.codec ?? 'kryo5'
    if (typeof codec !== 'string') {
      throw invalidArgument('type', `codec of group lock '${group}' must be 'kryo5' or 'string', got ${typeof codec}`, group)
    }
    const fields = viaNative(() => this.#native.groupFields(group, [...values], codec))
    return new GroupLock(this, group, fields)
  }

  /**
   * The {@link NonReentrantLock} named `name`: a second acquire by its owner rejects with
   * `NonReentrantError`. Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const lock = client.nonReentrantLock('payments:7')
   * ```
   */
  nonReentrantLock(name: string): NonReentrantLock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.NonReentrantLock, name, null))
    return new NonReentrantLock(this, LockKind.NonReentrantLock, name)
  }

  /**
   * The {@link NonReentrantFairLock} named `name` (Redisson's `getNonReentrantFairLock`): a
   * `FairLock` whose owner's second acquire rejects with `NonReentrantError`. Name rules as for
   * {@link Client.lock}.
   *
   * @example
   * ```js
   * const lock = client.nonReentrantFairLock('printer')
   * await lock.withLock(async () => print()) // served in the order of asking
   * ```
   */
  nonReentrantFairLock(name: string): NonReentrantFairLock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.NonReentrantFairLock, name, null))
    return new NonReentrantFairLock(this, LockKind.NonReentrantFairLock, name)
  }

  /**
   * The {@link ReadWriteLock} named `name` (Redisson's `RReadWriteLock`): `readLock()` for many
   * readers, `writeLock()` for one writer. Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const rw = client.readWriteLock('catalog')
   * await rw.readLock().withLock(async () => readCatalog())
   * ```
   */
  readWriteLock(name: string): ReadWriteLock {
    checkName(name)
    viaNative(() => this.#native.checkLock(LockKind.ReadLock, name, null))
    return new ReadWriteLock(new ReadLock(this, LockKind.ReadLock, name), new WriteLock(this, LockKind.WriteLock, name))
  }

  /**
   * The {@link Semaphore} named `name` (Redisson's `RSemaphore`). Name rules as for
   * {@link Client.lock}.
   *
   * @example
   * ```js
   * const slots = client.semaphore('render-slots')
   * ```
   */
  semaphore(name: string): Semaphore {
    checkName(name)
    return new Semaphore(this, viaNative(() => this.#native.semaphore(name)))
  }

  /**
   * The {@link PermitExpirableSemaphore} named `name` (Redisson's `RPermitExpirableSemaphore`).
   * Name rules as for {@link Client.lock}.
   *
   * @example
   * ```js
   * const seats = client.permitExpirableSemaphore('licences')
   * ```
   */
  permitExpirableSemaphore(name: string): PermitExpirableSemaphore {
    checkName(name)
    return new PermitExpirableSemaphore(this, viaNative(() => this.#native.permitExpirableSemaphore(name)))
  }

  /**
   * The {@link CountDownLatch} named `name` (Redisson's `RCountDownLatch`). Name rules as for
   * {@link Client.lock}.
   *
   * @example
   * ```js
   * const ready = client.countDownLatch('workers-ready')
   * ```
   */
  countDownLatch(name: string): CountDownLatch {
    checkName(name)
    return new CountDownLatch(this, viaNative(() => this.#native.countDownLatch(name)))
  }

  /**
   * What lives at `name`, as Redis has it now, in plain data: its kind, the ms left on its lease,
   * each holder with its hold count (a reader with the ms left on each read hold), a fair lock's
   * queue with each waiter's deadline, a fenced lock's last token, a counter's value, a
   * permit-expirable semaphore's permits. Read in one call; nothing is changed. The same data as
   * `npx crosslock inspect NAME`.
   *
   * @example
   * ```js
   * const seen = await client.inspect('orders:42')
   * for (const h of seen.holders) console.log(h.holder, 'holds it', h.holds, 'time(s);', seen.ttl, 'ms left')
   * ```
   */
  async inspect(name: string): Promise<Inspection> {
    checkName(name)
    return await viaNative(() => this.#native.inspect(name))
  }

  /**
   * Follows the object at `name` live: a {@link Watch} that yields each change (acquire,
   * re-entry, release, expiry, force-unlock, queue and count changes) as a {@link WatchEvent},
   * until closed. The same events as `npx crosslock watch NAME`.
   *
   * It subscribes to every channel the object can publish on (on a connection of its own) and
   * takes a snapshot after each message and at least every `interval` ms (default 100, at least
   * 10), so changes that publish nothing (an acquire) are seen within `interval`.
   *
   * @example
   * ```js
   * const watch = await client.watch('orders:42', { interval: 100 })
   * for await (const event of watch) console.log(event.text) // 2026-11-24T22:15:01.123Z  released  orders:42  …
   * ```
   */
  async watch(name: string, { interval = 100 }: { interval?: number } = {}): Promise<Watch> {
    checkName(name)
    if (typeof interval !== 'number' || !(interval >= 10)) {
      throw invalidArgument('range', `watch({ interval }): ms between snapshots, at least 10, got ${String(interval)}`)
    }
    return new Watch(await viaNative(() => this.#native.watch(name, interval)), name)
  }

  /**
   * The names of the objects whose names match `pattern` (Redis glob syntax), sorted, at most
   * `limit` (default 1000); found with `SCAN`, never `KEYS`. A key that lives beside an object (a
   * fair lock's queue, a fenced lock's token counter) stands for its object's name.
   *
   * @example
   * ```js
   * for (const name of await client.scan('orders:*')) console.log(name)
   * ```
   */
  async scan(pattern = '*', { limit = 1000 }: { limit?: number } = {}): Promise<string[]> {
    if (typeof pattern !== 'string' || pattern === '') {
      throw invalidArgument('type', `scan(pattern): a non-empty glob pattern such as 'orders:*', got ${String(pattern)}`)
    }
    checkWhole(limit, 'scan_limit', 'scan({ limit }): the number of names')
    return await viaNative(() => this.#native.scan(pattern, limit))
  }

  /**
   * Closes the client: pending acquires reject, held locks are released (within the response
   * timeout), renewal stops and the connections close. Idempotent.
   *
   * @example
   * ```js
   * await client.close()
   * ```
   */
  async close(): Promise<void> {
    this._holds.closeAll()
    await viaNative(() => this.#native.close())
    // Every measurement core made before its close was done, and nothing after.
    if (this.#record !== undefined) this.#record(this.#native.takeMeasurements(true))
    if (this.#replay !== undefined) this.#replay(this.#native.takeSpans(true))
  }

  /**
   * Closes the client, for `await using client = await connect(url)`.
   *
   * @example
   * ```js
   * {
   *   await using client = await connect(url)   // Node ≥ 24, TypeScript ≥ 5.2
   *   await client.lock('job').withLock(run)
   * } // closed here
   * ```
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /**
   * How many lock channels the shared subscription connection listens to now (diagnostics).
   *
   * @example
   * ```js
   * console.log(client.subscribedChannels()) // 0 when nobody waits
   * ```
   */
  subscribedChannels(): number {
    return viaNative(() => this.#native.subscribedChannels())
  }

  /**
   * How many locks the watchdog renews now (diagnostics).
   *
   * @example
   * ```js
   * const held = await lock.acquire()
   * console.log(client.watchedLocks()) // 1
   * ```
   */
  watchedLocks(): number {
    return viaNative(() => this.#native.watchedLocks())
  }
}

/** Throws the invalid-argument error a bad lock name deserves. */
function checkName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name === '') {
    throw invalidArgument(
      'type',
      `a lock name must be a non-empty string, such as 'orders:42'; got ${name === '' ? 'an empty string' : typeof name}`,
    )
  }
  if (!name.isWellFormed()) {
    throw invalidArgument(
      'type',
      `a lock name must be well-formed Unicode, but ${JSON.stringify(name)} has a lone surrogate; Redis keys ` +
        `are UTF-8, so it would be stored as U+FFFD and collide with other names`,
      name,
    )
  }
}

function checkBackoff(options: unknown, name: string): native.BackoffOptions | undefined {
  const b = optionsObject(options, `spin lock '${name}'`, ['backoff'], name).backoff
  if (b === undefined || b === null) return undefined
  const o = b as Record<string, unknown>
  if (typeof b !== 'object' || (o.kind !== 'exponential' && o.kind !== 'constant')) {
    throw invalidArgument('type', `backoff of spin lock '${name}' must be { kind: 'exponential', initial, max } or { kind: 'constant', initial }`, name)
  }
  optionsObject(o, `the ${o.kind} backoff of spin lock '${name}'`, o.kind === 'exponential' ? ['kind', 'initial', 'max'] : ['kind', 'initial'], name)
  for (const key of o.kind === 'exponential' ? ['initial', 'max'] : ['initial']) {
    const v = o[key]
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      throw invalidArgument('range', `backoff.${key} of spin lock '${name}' must be a number of milliseconds > 0, got ${String(v)}`, name)
    }
  }
  return o.kind === 'exponential'
    ? { kind: 'exponential', initial: o.initial as number, max: o.max as number }
    : { kind: 'constant', initial: o.initial as number }
}
