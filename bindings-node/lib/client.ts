/**
 * {@link Client}: one connection to a Redis deployment, with its own client id.
 *
 * @module
 */
import native = require('../native')
import { invalidArgument, viaNative } from './errors'
import { HeldLock, Lock, lostError } from './lock'

/**
 * Client settings. Durations are milliseconds.
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
   * For a `rediss://` server whose certificate comes from a private CA: the CA certificate(s) in
   * PEM (a string or a Buffer, e.g. `fs.readFileSync('ca.pem')`). Default: the web roots.
   */
  tlsCaCert?: string | Buffer | undefined
}

function checkConnectOptions(options: unknown): native.ConnectOptions {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') throw invalidArgument('type', `connect options must be an object, got ${typeof options}`)
  const o = options as Record<string, unknown>
  const out: native.ConnectOptions = {}
  for (const key of ['connectTimeout', 'responseTimeout', 'watchdogTimeout'] as const) {
    const v = o[key]
    if (v === undefined || v === null) continue
    if (typeof v !== 'number') throw invalidArgument('type', `${key} must be a number of milliseconds, got ${typeof v}`)
    if (!Number.isFinite(v) || v <= 0) throw invalidArgument('range', `${key} must be a finite number of milliseconds > 0, got ${v}`)
    out[key] = v
  }
  const batch = o.watchdogBatchSize
  if (batch !== undefined && batch !== null) {
    if (typeof batch !== 'number') throw invalidArgument('type', `watchdogBatchSize must be a number, got ${typeof batch}`)
    if (!Number.isInteger(batch) || batch < 1 || batch > 0xffffffff) {
      throw invalidArgument('range', `watchdogBatchSize must be an integer ≥ 1, got ${batch}`)
    }
    out.watchdogBatchSize = batch
  }
  const ca = o.tlsCaCert
  if (ca !== undefined && ca !== null) {
    if (typeof ca !== 'string' && !Buffer.isBuffer(ca)) {
      throw invalidArgument('type', `tlsCaCert must be PEM text (a string or a Buffer), got ${typeof ca}`)
    }
    out.tlsCaCert = typeof ca === 'string' ? Buffer.from(ca, 'utf8') : ca
  }
  return out
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
 * still held then expire after their lease (30 s with the watchdog).
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
  /** Live holds by lock name, oldest first: for lost-lock signals and owner look-ups. */
  readonly #holds = new Map<string, HeldLock[]>()

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
    let self: WeakRef<Client> | undefined
    const onLost = (event: native.LostLockEvent) => self?.deref()?._onLost(event.name, event.owner)
    const client = new Client(await viaNative(() => native.connect(url, opts, onLost)))
    self = new WeakRef(client)
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
   * Throws `InvalidArgumentError` (also a `TypeError`) for a non-string or empty name.
   *
   * @param name - the lock's key in Redis, e.g. `'orders:42'`
   *
   * @example
   * ```js
   * const lock = client.lock('orders:42')
   * ```
   */
  lock(name: string): Lock {
    if (typeof name !== 'string' || name === '') {
      throw invalidArgument(
        'type',
        `a lock name must be a non-empty string, such as 'orders:42'; got ${name === '' ? 'an empty string' : typeof name}`,
      )
    }
    return new Lock(this, viaNative(() => this.#native.lock(name)))
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
    const holds = [...this.#holds.values()].flat()
    this.#holds.clear()
    for (const held of holds) held._closed()
    await viaNative(() => this.#native.close())
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

  /** @internal */
  _track(held: HeldLock): void {
    const list = this.#holds.get(held.lock.name)
    if (list) list.push(held)
    else this.#holds.set(held.lock.name, [held])
  }

  /** @internal */
  _untrack(held: HeldLock): void {
    const list = this.#holds.get(held.lock.name)
    if (!list) return
    const i = list.lastIndexOf(held)
    if (i >= 0) list.splice(i, 1)
    if (list.length === 0) this.#holds.delete(held.lock.name)
  }

  /** @internal The latest live hold of lock `name` by `owner`. */
  _latestOf(name: string, owner: number): HeldLock | undefined {
    const list = this.#holds.get(name) ?? []
    for (let i = list.length - 1; i >= 0; i--) if (list[i]!.owner === owner) return list[i]
    return undefined
  }

  /** @internal Aborts every live hold of `name` by `owner`. */
  _lostAll(name: string, owner: number, reason: ReturnType<typeof lostError>): void {
    for (const held of this.#holds.get(name) ?? []) if (held.owner === owner) held._lost(reason)
  }

  /** @internal Called (on this thread) when a renewal found lock `name` of `owner` gone. */
  _onLost(name: string, owner: number): void {
    const holds = (this.#holds.get(name) ?? []).filter((h) => h.owner === owner)
    // Skip a stale report about an earlier tenure that was released since.
    if (holds.length === 0 || !holds[0]!.lock._isLost(owner)) return
    const reason = lostError(name, `${this.id}:${owner}`)
    for (const held of holds) held._lost(reason)
  }
}
