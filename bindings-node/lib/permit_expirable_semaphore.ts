/**
 * {@link PermitExpirableSemaphore}: Redisson's `RPermitExpirableSemaphore`, and its
 * {@link Permit}.
 *
 * @module
 */
import native = require('../native')
import { cancellable } from './abort'
import type { Client } from './client'
import { type CrosslockError, LockLostError, fromNative, hasCode, invalidArgument, viaNative } from './errors'
import { checkAcquire } from './args'
import { checkWhole } from './limits'

/**
 * How to take a permit: how long to wait (ms), its lease (ms; leave it out for the watchdog), and
 * an `AbortSignal`.
 *
 * @example
 * ```js
 * const permit = await seats.acquire({ wait: 5000, lease: 60_000 })
 * ```
 */
export interface PermitAcquireOptions {
  /** How long to wait: leave it out to wait as long as it takes, `0` for one try. */
  wait?: number | undefined
  /** How long the permit lives (≥ 1 ms); leave it out to have the watchdog keep it. */
  lease?: number | undefined
  /** Cancels the wait; it then rejects with the signal's reason and takes nothing. */
  signal?: AbortSignal | undefined
}

/**
 * A permit taken from a {@link PermitExpirableSemaphore}: what `acquire()` resolves to. Its `id`
 * can travel: any process, in any language, may release the permit by it.
 *
 * @example
 * ```js
 * const permit = await seats.acquire()
 * try { await work(permit.signal) } finally { await permit.release() }
 * ```
 */
export class Permit implements AsyncDisposable {
  /** The semaphore it was taken from. */
  readonly semaphore: PermitExpirableSemaphore
  /** Its id: 32 hex characters, the same Redisson shows. */
  readonly id: string
  readonly #controller = new AbortController()
  #released = false

  /** @internal Permits come from `acquire()`. */
  constructor(semaphore: PermitExpirableSemaphore, id: string) {
    this.semaphore = semaphore
    this.id = id
  }

  /**
   * Aborts, with a `LockLostError` reason, when the permit may be lost: released by someone else,
   * expired and counted back, or its lease ran out unrenewed. Reading it checks the permit's
   * deadline against the clock first, as a held lock's `signal` does.
   *
   * @example
   * ```js
   * permit.signal.throwIfAborted()
   * ```
   */
  get signal(): AbortSignal {
    this.#check()
    return this.#controller.signal
  }

  /**
   * Whether the permit may be lost (see `signal`).
   *
   * @example
   * ```js
   * if (permit.lost) console.warn('stop: the permit is gone')
   * ```
   */
  get lost(): boolean {
    this.#check()
    return this.#controller.signal.aborted
  }

  /** A live permit not known lost asks core, which decides from its deadline on the spot. */
  #check(): void {
    if (this.#released || this.#controller.signal.aborted) return
    let lost = false
    try {
      lost = this.semaphore._isLost(this.id)
    } catch {
      return // a closed client: nothing more to find
    }
    if (lost) this._lost(permitLostError(this.semaphore.name, this.id))
  }

  /**
   * Releases the permit; rejects with `NotHeldError` if it was already released (or reclaimed
   * after it expired) and `LockLostError` if it had expired.
   *
   * @example
   * ```js
   * await permit.release()
   * ```
   */
  async release(): Promise<void> {
    this.#released = true
    this.semaphore.client._permits.delete(this.semaphore.name, this.id)
    try {
      await this.semaphore.release(this.id)
    } catch (raw) {
      const e = fromNative(raw)
      // Lost (its deadline passed, or it was gone): the signal has aborted when this rejects.
      if (hasCode(e, 'LOCK_LOST')) this._lost(e as LockLostError)
      throw e
    }
  }

  /**
   * Makes the permit expire `lease` ms from now; resolves whether it still existed.
   *
   * @example
   * ```js
   * await permit.updateLease(60_000)
   * ```
   */
  async updateLease(lease: number): Promise<boolean> {
    return this.semaphore.updateLease(this.id, lease)
  }

  /**
   * Releases the permit unless it was already released, for `await using`.
   *
   * @example
   * ```js
   * { await using permit = await seats.acquire() }   // released here
   * ```
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.release()
  }

  /** @internal */
  _lost(reason: CrosslockError): void {
    if (!this.#controller.signal.aborted) this.#controller.abort(reason)
  }
}

/**
 * A semaphore whose permits have ids and leases, shared by every process (Node, Python, Rust,
 * Java on Redisson) using the same name on the same Redis. Stored exactly as Redisson's
 * `RPermitExpirableSemaphore`: the available count at the name (shared with `Semaphore`), each
 * taken permit in the sorted set `{name}:timeout` (its 16 random bytes → its expiry), and the
 * channel `redisson_sc:{name}`.
 *
 * **Taken without a lease, a permit is kept by this client's watchdog** while this process lives:
 * a crashed holder's permit comes back after the watchdog timeout, a live holder's never expires,
 * and if it is lost anyway its `signal` aborts. (Redisson's permits without a lease never expire,
 * so a crashed holder's never come back.)
 *
 * @example
 * ```js
 * const seats = client.permitExpirableSemaphore('licences')
 * await seats.trySetPermits(10)
 * const permit = await seats.acquire({ wait: 5000 })
 * try { await work() } finally { await permit.release() }
 * ```
 */
export class PermitExpirableSemaphore {
  /** The client it belongs to. */
  readonly client: Client
  /** The semaphore's name: its key in Redis. */
  readonly name: string
  readonly #native: native.PermitExpirableSemaphore

  /** @internal Made by `client.permitExpirableSemaphore(name)`. */
  constructor(client: Client, nativeSemaphore: native.PermitExpirableSemaphore) {
    this.client = client
    this.#native = nativeSemaphore
    this.name = nativeSemaphore.name
  }

  /**
   * Takes a permit, as long as it takes or `wait` ms; rejects with `LockTimeoutError` when `wait`
   * passes, with the signal's reason when `signal` aborts (taking nothing).
   *
   * @example
   * ```js
   * const permit = await seats.acquire({ lease: 60_000 })
   * ```
   */
  async acquire(options?: PermitAcquireOptions): Promise<Permit> {
    return (await this.#take(options, null, true)) as Permit
  }

  /**
   * Tries to take a permit: resolves it, or `null`. One try by default; with `wait`, waits up to
   * that long.
   *
   * @example
   * ```js
   * const permit = await seats.tryAcquire()
   * if (permit === null) return 'full'
   * ```
   */
  async tryAcquire(options?: PermitAcquireOptions): Promise<Permit | null> {
    return this.#take(options, 0, false)
  }

  /**
   * Releases permit `id` (anyone may); rejects with `NotHeldError` when there is no such permit
   * and `LockLostError` when it had expired (it is counted back all the same).
   *
   * @example
   * ```js
   * await seats.release(idFromAnotherProcess)
   * ```
   */
  async release(id: string): Promise<void> {
    this.client._permits.delete(this.name, checkId(id, this.name))
    await viaNative(() => this.#native.release(id))
  }

  /**
   * Releases permit `id`; resolves whether it was taken and unexpired.
   *
   * @example
   * ```js
   * const released = await seats.tryRelease(id)
   * ```
   */
  async tryRelease(id: string): Promise<boolean> {
    this.client._permits.delete(this.name, checkId(id, this.name))
    return viaNative(() => this.#native.tryRelease(id))
  }

  /**
   * Makes permit `id` expire `lease` ms from now; resolves whether it exists.
   *
   * @example
   * ```js
   * await seats.updateLease(id, 60_000)
   * ```
   */
  async updateLease(id: string, lease: number): Promise<boolean> {
    if (typeof lease !== 'number') throw invalidArgument('type', `updateLease: lease must be a number of ms, got ${typeof lease}`, this.name)
    return viaNative(() => this.#native.updateLease(checkId(id, this.name), lease))
  }

  /**
   * Milliseconds before permit `id` expires: `null` if there is no such permit, `Infinity` if it
   * never does.
   *
   * @example
   * ```js
   * console.log(await seats.remainingLease(permit.id))
   * ```
   */
  async remainingLease(id: string): Promise<number | null> {
    return viaNative(() => this.#native.remainingLease(checkId(id, this.name)))
  }

  /**
   * Sets the number of permits unless it is set already; resolves whether it did.
   *
   * @example
   * ```js
   * await seats.trySetPermits(10)
   * ```
   */
  async trySetPermits(permits: number): Promise<boolean> {
    const n = checkWhole(permits, 'permits_set', `trySetPermits: the permits of '${this.name}'`, this.name)
    return viaNative(() => this.#native.trySetPermits(n))
  }

  /**
   * Adds (negative: removes) permits; resolves the new count.
   *
   * @example
   * ```js
   * await seats.addPermits(5)
   * ```
   */
  async addPermits(permits: number): Promise<number> {
    const n = checkWhole(permits, 'permit_delta', `addPermits: the permits to add to '${this.name}'`, this.name)
    return viaNative(() => this.#native.addPermits(n))
  }

  /**
   * How many permits are available now (expired ones counted back first).
   *
   * @example
   * ```js
   * console.log(await seats.availablePermits())
   * ```
   */
  async availablePermits(): Promise<number> {
    return viaNative(() => this.#native.availablePermits())
  }

  async #take(options: unknown, defaultWait: number | null, failOnTimeout: boolean): Promise<Permit | null> {
    const o = checkAcquire(options, `semaphore '${this.name}'`, this.name, defaultWait, ['wait', 'lease', 'signal'])
    const id = await cancellable(
      o.signal,
      (token) => this.#native.acquire(o.wait, o.lease, token, failOnTimeout),
      (taken) => taken !== null,
      (taken) => viaNative(() => this.#native.tryRelease(taken as string)),
    )
    if (id === null) return null
    const permit = new Permit(this, id)
    this.client._permits.track(permit)
    return permit
  }

  /** @internal Whether core recorded permit `id` as lost. */
  _isLost(id: string): boolean {
    return viaNative(() => this.#native.isLost(id))
  }
}

function checkId(id: unknown, name: string): string {
  if (typeof id !== 'string') throw invalidArgument('type', `a permit id of '${name}' is a string of 32 hex characters, got ${typeof id}`, name)
  return id
}

/** The live permits of one client, for lost-permit signals. @internal */
export class Permits {
  readonly #byKey = new Map<string, Permit>()

  track(permit: Permit): void {
    this.#byKey.set(`${permit.semaphore.name}\u0000${permit.id}`, permit)
  }

  delete(name: string, id: string): void {
    this.#byKey.delete(`${name}\u0000${id}`)
  }

  onLost(name: string, id: string): void {
    const permit = this.#byKey.get(`${name}\u0000${id}`)
    if (permit === undefined || !permit.semaphore._isLost(id)) return
    permit._lost(permitLostError(name, id))
  }
}

/** The reason a lost permit's signal aborts with. */
function permitLostError(name: string, id: string): LockLostError {
  return new LockLostError(
    `permit ${id} of semaphore '${name}' may be lost: a renewal found it gone (released by someone else, or ` +
      `expired and counted back), or its lease ran out unrenewed; stop the work it allows`,
    { lockName: name, holder: id },
  )
}
