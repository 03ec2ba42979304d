/**
 * {@link MultiLock} (all of several locks, or none) and {@link RedLock} (a majority): Redisson's
 * `RMultiLock` and `RRedLock`.
 *
 * @module
 */
import native = require('../native')
import { cancellable } from './abort'
import { invalidArgument, viaNative } from './errors'
import { acquiringOwner, inScope } from './identity'
import { checkExtendLease } from './held'
import { checkAcquire } from './args'
import { type AcquireOptions, Lockable } from './lockable'

/**
 * One acquisition of a {@link MultiLock} or {@link RedLock}.
 *
 * @example
 * ```js
 * const held = await both.acquire()
 * try { await work() } finally { await held.release() }
 * ```
 */
export class HeldMultiLock implements AsyncDisposable {
  /** The composite held. */
  readonly lock: MultiLock
  /** The owner number holding the parts. */
  readonly owner: number
  /** The names of the parts held (a red lock's majority). */
  readonly parts: string[]
  #validity: number | undefined
  #released = false

  /** @internal */
  constructor(lock: MultiLock, owner: number, held: native.MultiHeld) {
    this.lock = lock
    this.owner = owner
    this.parts = held.parts
    this.#validity = held.validity ?? undefined
  }

  /** With a lease: `lease − time to acquire − clock drift`, in ms (after `extend()`, from the
   * extend); `undefined` without. */
  get validity(): number | undefined {
    return this.#validity
  }

  /**
   * Sets the lease of every part held to `lease` milliseconds from now, as `HeldLock.extend`
   * does (parts kept by the watchdog become parts with that lease); `validity` becomes
   * `lease − time to extend − clock drift`. Resolves while every part (a RedLock: a majority) was
   * extended; else rejects with `LockLostError` naming a lost part, or the first part's error.
   *
   * @param lease - the new lease in milliseconds, from now
   *
   * @example
   * ```js
   * const held = await both.acquire({ lease: 10_000 })
   * await held.extend(60_000)
   * await held.release()
   * ```
   */
  async extend(lease: number): Promise<void> {
    checkExtendLease(lease, 'multi-lock')
    this.#validity = await this.lock._extend(this.owner, lease)
  }

  /**
   * Whether too many parts may be lost (any part of a MultiLock; more than a minority of a
   * RedLock).
   *
   * @example
   * ```js
   * if (held.lost) throw new Error('stop')
   * ```
   */
  get lost(): boolean {
    return this.lock._isLost(this.owner)
  }

  /**
   * Releases every part held.
   *
   * @example
   * ```js
   * await held.release()
   * ```
   */
  async release(): Promise<void> {
    this.#released = true
    await this.lock._release(this.owner)
  }

  /**
   * Releases unless already released, for `await using`.
   *
   * @example
   * ```js
   * { await using held = await both.acquire() }
   * ```
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.release()
  }
}

/**
 * All of several locks, or none. The parts are lock objects of any kind, from any clients — so
 * from different Redis deployments. It has no keys of its own: each part is stored, and
 * interoperates with Redisson, as its own kind. Parts are taken in the order given (use one order
 * everywhere to avoid deadlocks); when one cannot be had, it gives back what it took and starts
 * over while `wait` allows (Redisson's algorithm); when one fails (a server down), the error
 * names it and nothing is held.
 *
 * @example
 * ```js
 * const both = new MultiLock([east.lock('account:1'), west.lock('account:2')])
 * await both.withLock(async () => transfer())   // both, or neither
 * ```
 */
export class MultiLock {
  /** The parts, in order. */
  readonly locks: readonly Lockable[]
  readonly #native: native.MultiLock

  /**
   * @param locks - the parts (lock objects from any clients), in the order to take them
   */
  constructor(locks: readonly Lockable[]) {
    if (!Array.isArray(locks) || locks.length === 0 || !locks.every((l) => l instanceof Lockable)) {
      throw invalidArgument('type', `new ${new.target.name}(locks): locks must be a non-empty array of lock objects (client.lock(…), …)`)
    }
    this.locks = [...locks]
    const red = new.target === RedLock
    this.#native = viaNative(
      () =>
        new native.MultiLock(
          locks.map((l) => l.client._native),
          locks.map((l) => l._kind),
          locks.map((l) => l.name),
          locks.map((l) => l._backoff ?? null),
          red,
        ),
    )
  }

  /**
   * Takes every part (a RedLock: a majority), as long as it takes or `wait` ms (the whole);
   * rejects with `LockTimeoutError` when `wait` passes. With `lease`, each part expires between
   * `lease` and `lease + wait` later; without, each is kept by its client's watchdog.
   *
   * @example
   * ```js
   * const held = await both.acquire({ wait: 5000 })
   * ```
   */
  async acquire(options?: AcquireOptions): Promise<HeldMultiLock> {
    return (await this.#take(options, null, true)) as HeldMultiLock
  }

  /**
   * Tries to take it: resolves the hold, or `null`. One round by default; with `wait`, up to that
   * long.
   *
   * @example
   * ```js
   * const held = await both.tryAcquire({ wait: 1000 })
   * ```
   */
  async tryAcquire(options?: AcquireOptions): Promise<HeldMultiLock | null> {
    return this.#take(options, 0, false)
  }

  /**
   * Runs `fn` holding it and always releases it. Resolves to what `fn` returns.
   *
   * @example
   * ```js
   * await both.withLock(async () => transfer())
   * ```
   */
  async withLock<T>(fn: (held: HeldMultiLock) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== 'function') throw invalidArgument('type', `withLock(fn): fn must be a function, got ${typeof fn}`)
    const o = checkAcquire(options, 'the multi-lock', undefined, null)
    const owner = acquiringOwner(o.owner)
    return inScope(owner, async () => {
      const held = (await this.#take({ ...(options ?? {}), owner }, null, true)) as HeldMultiLock
      try {
        return await fn(held)
      } finally {
        await held.release()
      }
    })
  }

  async #take(options: unknown, defaultWait: number | null, failOnTimeout: boolean): Promise<HeldMultiLock | null> {
    const o = checkAcquire(options, 'the multi-lock', undefined, defaultWait)
    const owner = acquiringOwner(o.owner)
    const held = await cancellable(
      o.signal,
      (token) => this.#native.acquire(owner, o.wait, o.lease, token, failOnTimeout),
      (h) => h !== null,
      () => viaNative(() => this.#native.release(owner)),
    )
    return held === null ? null : new HeldMultiLock(this, owner, held)
  }

  /** @internal */
  _extend(owner: number, lease: number): Promise<number> {
    return viaNative(() => this.#native.extend(owner, lease))
  }

  /** @internal */
  _release(owner: number): Promise<void> {
    return viaNative(() => this.#native.release(owner))
  }

  /** @internal */
  _isLost(owner: number): boolean {
    return viaNative(() => this.#native.isLost(owner))
  }
}

/**
 * A majority of locks on independent Redis masters: the Redlock algorithm, Redisson's `RRedLock`.
 * As {@link MultiLock}, but acquired once `n/2 + 1` of the `n` parts are held; with a lease,
 * `held.validity` says how long the locks are certainly held.
 *
 * Redisson deprecates `RRedLock` ("use RLock or RFencedLock instead"): a majority of expiring
 * locks does not make a pause-proof lock. For correctness under pauses prefer a `FencedLock`,
 * whose tokens let the protected resource refuse a stale holder's writes.
 *
 * @example
 * ```js
 * const red = new RedLock(clients.map((c) => c.lock('job:7')))
 * const held = await red.acquire({ wait: 2000, lease: 10_000 })
 * console.log(held.validity)   // ms
 * await held.release()
 * ```
 */
export class RedLock extends MultiLock {}
