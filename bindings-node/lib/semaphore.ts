/**
 * {@link Semaphore}: Redisson's `RSemaphore`.
 *
 * @module
 */
import native = require('../native')
import { cancellable } from './abort'
import type { Client } from './client'
import { invalidArgument, viaNative } from './errors'
import { checkAcquire, checkPermits, optionsObject } from './args'
import { checkWhole } from './limits'

/**
 * How to take permits: how many, how long to wait (ms), and an `AbortSignal`.
 *
 * @example
 * ```js
 * await sem.acquire({ permits: 2, wait: 5000, signal: AbortSignal.timeout(10_000) })
 * ```
 */
export interface PermitOptions {
  /** How many permits (default 1). */
  permits?: number | undefined
  /** How long to wait: leave it out to wait as long as it takes, `0` for one try. */
  wait?: number | undefined
  /** Cancels the wait; it then rejects with the signal's reason and takes nothing. */
  signal?: AbortSignal | undefined
}

/** The keys of {@link PermitOptions}. */
const PERMIT_KEYS = ['permits', 'wait', 'signal'] as const

/**
 * A counting semaphore shared by every process (Node, Python, Rust, Java on Redisson) using the
 * same name on the same Redis, stored exactly as Redisson's `RSemaphore`: a string at the name
 * holding the permits available, and the channel `redisson_sc:{name}` on which every release
 * publishes how many are available.
 *
 * **Permits have no owner**: anyone may release them, and they never expire, so *a process that
 * crashes holding permits never gives them back* — use a `PermitExpirableSemaphore` when that
 * matters. Set the permits once with {@link Semaphore.trySetPermits} (an unset semaphore has
 * none). Waiters are woken by releases; the waiters of one process take turns in order, so a
 * waiter for several permits is not starved by later ones taking single permits.
 *
 * @example
 * ```js
 * const slots = client.semaphore('render-slots')
 * await slots.trySetPermits(4)
 * await slots.withPermits(async () => { await render() })   // one permit, always given back
 * ```
 */
export class Semaphore {
  /** The client it belongs to. */
  readonly client: Client
  /** The semaphore's name: its key in Redis. */
  readonly name: string
  readonly #native: native.Semaphore

  /** @internal Made by `client.semaphore(name)`. */
  constructor(client: Client, nativeSemaphore: native.Semaphore) {
    this.client = client
    this.#native = nativeSemaphore
    this.name = nativeSemaphore.name
  }

  /**
   * Sets the number of permits unless it is set already; resolves whether it did.
   *
   * @example
   * ```js
   * await sem.trySetPermits(4)
   * ```
   */
  async trySetPermits(permits: number): Promise<boolean> {
    const n = checkWhole(permits, 'permits_set', `trySetPermits: the permits of '${this.name}'`, this.name)
    return viaNative(() => this.#native.trySetPermits(n))
  }

  /**
   * Takes permits (default 1), waiting as long as it takes or `wait` ms; rejects with
   * `LockTimeoutError` when `wait` passes, with the signal's reason when `signal` aborts (taking
   * nothing).
   *
   * @example
   * ```js
   * await sem.acquire({ permits: 2, wait: 5000 })
   * try { await work() } finally { await sem.release(2) }
   * ```
   */
  async acquire(options?: PermitOptions): Promise<void> {
    await this.#take(options, null, true)
  }

  /**
   * Tries to take permits: resolves `true` when taken, `false` otherwise. One try by default;
   * with `wait`, waits up to that long.
   *
   * @example
   * ```js
   * if (await sem.tryAcquire()) { try { await work() } finally { await sem.release() } }
   * ```
   */
  async tryAcquire(options?: PermitOptions): Promise<boolean> {
    return this.#take(options, 0, false)
  }

  /**
   * Runs `fn` with permits taken (default 1) and always gives them back. Resolves to what `fn`
   * returns.
   *
   * @example
   * ```js
   * const page = await sem.withPermits(() => fetchPage(url), { wait: 10_000 })
   * ```
   */
  async withPermits<T>(fn: () => T | PromiseLike<T>, options?: PermitOptions): Promise<T> {
    if (typeof fn !== 'function') throw invalidArgument('type', `withPermits(fn): fn must be a function, got ${typeof fn}`, this.name)
    const permits = checkPermits(optionsObject(options, `semaphore '${this.name}'`, PERMIT_KEYS, this.name).permits, this.name, 1, true)
    await this.#take(options, null, true)
    try {
      return await fn()
    } finally {
      await this.release(permits)
    }
  }

  /**
   * Gives permits back (default 1; anyone may) and wakes waiters.
   *
   * @example
   * ```js
   * await sem.release(2)
   * ```
   */
  async release(permits = 1): Promise<void> {
    await viaNative(() => this.#native.release(checkPermits(permits, this.name)))
  }

  /**
   * Gives permits back (default 1) only if the semaphore exists (Redisson's `releaseIfExists`):
   * resolves whether it did. An absent semaphore (never set up, or deleted) stays absent and
   * nobody is woken; `release` would create it.
   *
   * @example
   * ```js
   * if (!(await sem.releaseIfExists(2))) console.log('the semaphore was deleted')
   * ```
   */
  async releaseIfExists(permits = 1): Promise<boolean> {
    return viaNative(() => this.#native.releaseIfExists(checkPermits(permits, this.name)))
  }

  /**
   * How many permits are available now (0 when never set).
   *
   * @example
   * ```js
   * console.log(await sem.availablePermits())
   * ```
   */
  async availablePermits(): Promise<number> {
    return viaNative(() => this.#native.availablePermits())
  }

  /**
   * Adds (negative: removes) permits; resolves the new count.
   *
   * @example
   * ```js
   * await sem.addPermits(2)
   * ```
   */
  async addPermits(permits: number): Promise<number> {
    const n = checkWhole(permits, 'permit_delta', `addPermits: the permits to add to '${this.name}'`, this.name)
    return viaNative(() => this.#native.addPermits(n))
  }

  /**
   * Takes every available permit; resolves how many.
   *
   * @example
   * ```js
   * const taken = await sem.drainPermits()
   * ```
   */
  async drainPermits(): Promise<number> {
    return viaNative(() => this.#native.drainPermits())
  }

  /**
   * Deletes the semaphore's counter; resolves whether it existed.
   *
   * @example
   * ```js
   * await sem.delete()
   * ```
   */
  async delete(): Promise<boolean> {
    return viaNative(() => this.#native.delete())
  }

  async #take(options: unknown, defaultWait: number | null, failOnTimeout: boolean): Promise<boolean> {
    const o = checkAcquire(options, `semaphore '${this.name}'`, this.name, defaultWait, PERMIT_KEYS)
    const permits = checkPermits((options as PermitOptions | undefined)?.permits, this.name, 0, true)
    return cancellable(
      o.signal,
      (token) => this.#native.acquire(permits, o.wait, token, failOnTimeout),
      (taken) => taken,
      () => viaNative(() => this.#native.release(permits)),
    )
  }
}
