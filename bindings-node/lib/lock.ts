/**
 * {@link Lock} (Redisson's RLock) and {@link HeldLock}, the proof of one acquisition.
 *
 * @module
 */
import native = require('../native')
import type { Client } from './client'
import {
  CrosslockError,
  LockLostError,
  NotHeldError,
  hasCode,
  invalidArgument,
  viaNative,
} from './errors'
import { acquiringOwner, checkOwner, currentOwner, inScope } from './identity'

/**
 * How to acquire a lock. Durations are milliseconds, as for `setTimeout`.
 *
 * @example
 * ```js
 * const options = { wait: 2000, lease: 10_000, signal: AbortSignal.timeout(5000) }
 * const held = await lock.acquire(options)
 * ```
 */
export interface AcquireOptions {
  /**
   * How long to wait for the lock: leave it out (or `Infinity`) to wait as long as it takes, `0`
   * for a single try. When it passes, `acquire()` rejects with `LockTimeoutError` and
   * `tryAcquire()` resolves `null`.
   */
  wait?: number | undefined
  /**
   * How long the lock lives without renewal (≥ 1 ms). Leave it out to have the watchdog keep the
   * lock for as long as this process holds it (a 30 s lease renewed every 10 s by default).
   */
  lease?: number | undefined
  /**
   * Cancels a waiting acquire: it then rejects with `signal.reason` (an `AbortError`
   * `DOMException` when `abort()` was called without a reason), and leaves nothing behind: no
   * lock, no waiter, no subscription. A lock acquired in the same instant is given back.
   */
  signal?: AbortSignal | undefined
  /**
   * Acquire as this owner number (from `newOwner()`) instead of the enclosing owner scope or a
   * fresh owner; see `runAsOwner`.
   */
  owner?: number | undefined
}

/**
 * Whose hold a release or a query is about. Outside an owner scope `lock.release()` needs it
 * (it rejects with `NotHeldError` without it) and `lock.isHeld()` / `lock.holdCount()` answer
 * `false` / `0` without it.
 *
 * @example
 * ```js
 * const owner = newOwner()
 * await lock.acquire({ owner })
 * console.log(await lock.holdCount({ owner })) // 1
 * await lock.release({ owner })
 * ```
 */
export interface OwnerOptions {
  /** The owner number; by default the enclosing owner scope's (see `runAsOwner`), and none outside one. */
  owner?: number | undefined
}

interface Checked {
  wait: number | null
  lease: number | null
  signal: AbortSignal | undefined
  owner: number | undefined
}

function optionsObject(options: unknown, lockName: string): Record<string, unknown> {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') {
    throw invalidArgument('type', `options for lock '${lockName}' must be an object, got ${typeof options}`, lockName)
  }
  return options as Record<string, unknown>
}

function checkAcquire(options: unknown, lockName: string, defaultWait: number | null): Checked {
  const o = optionsObject(options, lockName)
  let wait = defaultWait
  if (o.wait !== undefined && o.wait !== null) {
    if (typeof o.wait !== 'number') {
      throw invalidArgument('type', `wait must be a number of milliseconds, got ${typeof o.wait} (lock '${lockName}')`, lockName)
    }
    if (Number.isNaN(o.wait) || o.wait < 0) {
      throw invalidArgument(
        'range',
        `wait must be ≥ 0 ms (0 tries once; leave it out to wait as long as it takes), got ${o.wait} (lock '${lockName}')`,
        lockName,
      )
    }
    wait = o.wait === Infinity ? null : o.wait
  }
  let lease: number | null = null
  if (o.lease !== undefined && o.lease !== null) {
    if (typeof o.lease !== 'number') {
      throw invalidArgument('type', `lease must be a number of milliseconds, got ${typeof o.lease} (lock '${lockName}')`, lockName)
    }
    if (!Number.isFinite(o.lease) || o.lease < 1) {
      throw invalidArgument(
        'range',
        `lease must be a finite number of milliseconds ≥ 1 (leave it out for watchdog renewal), got ${o.lease} (lock '${lockName}')`,
        lockName,
      )
    }
    lease = o.lease
  }
  let signal: AbortSignal | undefined
  if (o.signal !== undefined && o.signal !== null) {
    const s = o.signal as AbortSignal
    if (typeof s !== 'object' || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function') {
      throw invalidArgument('type', `signal must be an AbortSignal (lock '${lockName}')`, lockName)
    }
    signal = s
  }
  const owner = o.owner === undefined || o.owner === null ? undefined : checkOwner(o.owner, lockName)
  return { wait, lease, signal, owner }
}

function checkOwnerOption(options: unknown, lockName: string): number | undefined {
  const o = optionsObject(options, lockName)
  return o.owner === undefined || o.owner === null ? undefined : checkOwner(o.owner, lockName)
}

/**
 * A reentrant distributed lock, stored in Redis exactly as Redisson's `RLock`: a hash at the
 * lock's name with one field, `<client-id>:<owner>` → hold count, and a TTL (the lease). A Java
 * service calling Redisson's `getLock(name)`, a Python worker or a Rust daemon on the same name
 * takes part in the same exclusion.
 *
 * Get one from {@link Client.lock}. Who holds it is decided by the owner rules of `runAsOwner`:
 * outside an owner scope each `acquire()` is its own holder; inside `withLock` (or
 * `runAsOwner`) nested acquires re-enter.
 *
 * @example
 * ```js
 * const lock = client.lock('orders:42')
 * const held = await lock.acquire({ wait: 2000 })   // rejects with LockTimeoutError after 2 s
 * try {
 *   // exclusive work; held.signal aborts if the lock is lost
 * } finally {
 *   await held.release()
 * }
 * ```
 */
export class Lock {
  /** The client this lock belongs to. */
  readonly client: Client
  /** The lock's name: its key in Redis. */
  readonly name: string
  readonly #native: native.Lock

  /** @internal Locks come from `client.lock(name)`. */
  constructor(client: Client, nativeLock: native.Lock) {
    this.client = client
    this.#native = nativeLock
    this.name = nativeLock.name
  }

  /**
   * Waits until the lock is acquired and resolves to the {@link HeldLock} that releases it.
   *
   * Without `wait` it waits as long as it takes, woken by Redis pub/sub the moment the holder
   * releases (never by polling). Rejects with `LockTimeoutError` when `wait` passes, with the
   * signal's reason when `signal` aborts, `WrongTypeError` when the key holds something else,
   * `RedisUnavailableError` when Redis cannot be reached, `InvalidArgumentError` for bad options.
   *
   * @param options - `wait`, `lease`, `signal`, `owner`
   *
   * @example
   * ```js
   * const held = await lock.acquire()
   * try { await doWork() } finally { await held.release() }
   *
   * // at most 500 ms of waiting, and let Redis expire the lock after 10 s whatever happens
   * const short = await lock.acquire({ wait: 500, lease: 10_000 })
   * await short.release()
   *
   * // cancellable
   * const held2 = await lock.acquire({ signal: AbortSignal.timeout(1000) })
   * await held2.release()
   * ```
   */
  async acquire(options?: AcquireOptions): Promise<HeldLock> {
    return (await this.#acquire(checkAcquire(options, this.name, null), true)) as HeldLock
  }

  /**
   * Tries to acquire the lock: resolves to a {@link HeldLock}, or `null` if it is held by someone
   * else. By default a single try (`wait: 0`); with `wait`, waits up to that long.
   *
   * @param options - `wait` (default 0), `lease`, `signal`, `owner`
   *
   * @example
   * ```js
   * const held = await lock.tryAcquire()
   * if (held === null) return 'busy'
   * try { await doWork() } finally { await held.release() }
   * ```
   */
  async tryAcquire(options?: AcquireOptions): Promise<HeldLock | null> {
    return this.#acquire(checkAcquire(options, this.name, 0), false)
  }

  async #acquire(o: Checked, failOnTimeout: boolean): Promise<HeldLock | null> {
    const owner = acquiringOwner(o.owner)
    const signal = o.signal
    if (signal?.aborted) throw signal.reason
    let token: native.CancelToken | null = null
    const onAbort = () => token?.cancel()
    if (signal) {
      token = new native.CancelToken()
      signal.addEventListener('abort', onAbort, { once: true })
    }
    try {
      const acquired = await viaNative(() => this.#native.acquire(owner, o.wait, o.lease, token, failOnTimeout))
      if (!acquired) return null
      if (signal?.aborted) {
        // Aborted while the winning attempt was in flight: give it back, as promised.
        await viaNative(() => this.#native.release(owner)).catch(() => {})
        throw signal.reason
      }
      const held = new HeldLock(this, owner)
      this.client._track(held)
      return held
    } catch (e) {
      if (signal?.aborted && hasCode(e, 'CANCELLED')) throw signal.reason
      throw e
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Releases one hold of an owner named explicitly: the `owner` option, else the enclosing owner
   * scope's (`withLock`, `runAsOwner`). To release one particular acquisition, use
   * `held.release()` on the {@link HeldLock} that `acquire()` returned: it always releases as the
   * owner it was acquired with.
   *
   * Outside an owner scope and without `owner` there is no caller to release as (there, every
   * `acquire()` is a holder of its own), so it rejects with `NotHeldError` saying so, and changes
   * nothing in Redis: it never releases a hold some other task took.
   *
   * Rejects with `NotHeldError` (naming the lock and the caller; Redis is left unchanged) when
   * that owner does not hold the lock, and with `LockLostError` when it held it but the lock
   * expired or was force-unlocked meanwhile.
   *
   * @param options - `owner`
   *
   * @example
   * ```js
   * // inside an owner scope
   * await runAsOwner(async () => {
   *   await lock.acquire()
   *   try { await doWork() } finally { await lock.release() }
   * })
   *
   * // with an explicit owner
   * const owner = newOwner()
   * await lock.acquire({ owner })
   * try { await doWork() } finally { await lock.release({ owner }) }
   *
   * // outside a scope: release the HeldLock instead
   * const held = await lock.acquire()
   * try { await doWork() } finally { await held.release() }
   * ```
   */
  async release(options?: OwnerOptions): Promise<void> {
    const owner = this.#releasingOwner(options)
    const held = this.client._latestOf(this.name, owner)
    if (held) return held.release()
    await viaNative(() => this.#native.release(owner))
  }

  /**
   * Runs `fn` while holding the lock, and always releases it, whether `fn` resolves or throws.
   * `fn` runs in the lock's owner scope, so acquires nested in it (of this lock or any other)
   * re-enter rather than wait for themselves. Resolves to what `fn` returns.
   *
   * If `fn` throws, that error is what `withLock` rejects with (a failing release is then
   * ignored; a lost lock is still visible on `held.signal`). If `fn` succeeds but the release
   * finds the lock lost, `withLock` rejects with `LockLostError`.
   *
   * @param fn - the exclusive work; receives the {@link HeldLock}
   * @param options - `wait`, `lease`, `signal`, `owner` for the acquire
   *
   * @example
   * ```js
   * const total = await lock.withLock(async (held) => {
   *   const n = Number(await redis.get('counter')) + 1
   *   await redis.set('counter', n)
   *   return n
   * }, { wait: 5000 })
   * ```
   */
  async withLock<T>(fn: (held: HeldLock) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== 'function') {
      throw invalidArgument('type', `withLock(fn): fn must be a function, got ${typeof fn} (lock '${this.name}')`, this.name)
    }
    const o = checkAcquire(options, this.name, null)
    const owner = acquiringOwner(o.owner)
    return inScope(owner, async () => {
      const held = (await this.#acquire({ ...o, owner }, true)) as HeldLock
      let result: T
      try {
        result = await fn(held)
      } catch (e) {
        await held.release().catch(() => {})
        throw e
      }
      await held.release()
      return result
    })
  }

  /**
   * Whether anyone (any client, any language) holds the lock.
   *
   * @example
   * ```js
   * if (await lock.isLocked()) console.log('busy')
   * ```
   */
  async isLocked(): Promise<boolean> {
    return viaNative(() => this.#native.isLocked())
  }

  /**
   * Whether an owner holds the lock, asking Redis: the `owner` option's, else the enclosing
   * owner scope's. Outside a scope and without `owner` no owner is asking, and it resolves
   * `false` without asking Redis: it never answers for a hold some other task took (outside
   * scopes every `acquire()` is a holder of its own). To ask about a {@link HeldLock}, pass
   * `{ owner: held.owner }`.
   *
   * @param options - `owner`
   *
   * @example
   * ```js
   * await lock.withLock(async () => {
   *   console.log(await lock.isHeld()) // true
   * })
   * const held = await lock.acquire()
   * console.log(await lock.isHeld({ owner: held.owner })) // true
   * console.log(await lock.isHeld())                      // false: outside a scope, no owner asks
   * ```
   */
  async isHeld(options?: OwnerOptions): Promise<boolean> {
    const owner = this.#queryOwner(options)
    if (owner === undefined) return false
    return viaNative(() => this.#native.isHeldBy(owner))
  }

  /**
   * How many times an owner holds the lock (the `owner` option's, else the enclosing owner
   * scope's): 0 when it does not, 2 after a nested acquire, and so on. Outside a scope and
   * without `owner` it resolves `0` without asking Redis, as {@link Lock.isHeld} resolves
   * `false`: never another task's count.
   *
   * @param options - `owner`
   *
   * @example
   * ```js
   * await lock.withLock(async () => {
   *   await lock.withLock(async () => console.log(await lock.holdCount())) // 2
   * })
   * const held = await lock.acquire()
   * console.log(await lock.holdCount({ owner: held.owner })) // 1
   * ```
   */
  async holdCount(options?: OwnerOptions): Promise<number> {
    const owner = this.#queryOwner(options)
    if (owner === undefined) return 0
    return viaNative(() => this.#native.holdCountOf(owner))
  }

  /**
   * Milliseconds before the lock expires: `null` when it is not locked, `Infinity` when its key
   * has no expiry.
   *
   * @example
   * ```js
   * const held = await lock.acquire({ lease: 10_000 })
   * console.log(await lock.remainingLease()) // ≈ 10000
   * ```
   */
  async remainingLease(): Promise<number | null> {
    return viaNative(() => this.#native.remainingLease())
  }

  /**
   * Deletes the lock whoever holds it, and wakes a waiter. Resolves `true` if it was locked. The
   * former holder's `held.signal` aborts at its next renewal.
   *
   * @example
   * ```js
   * if (await lock.forceUnlock()) console.log('was locked; freed')
   * ```
   */
  async forceUnlock(): Promise<boolean> {
    return viaNative(() => this.#native.forceUnlock())
  }

  /** The owner a query is about: the `owner` option, else the scope's, else none. */
  #queryOwner(options: unknown): number | undefined {
    return checkOwnerOption(options, this.name) ?? currentOwner()
  }

  /**
   * The owner a release acts as: the `owner` option, else the scope's. Throws `NotHeldError`
   * when there is neither: never guess (say, the latest hold taken through this object), since
   * that hold may be another task's.
   */
  #releasingOwner(options: unknown): number {
    const owner = checkOwnerOption(options, this.name) ?? currentOwner()
    if (owner !== undefined) return owner
    throw new NotHeldError(
      `lock.release() of lock '${this.name}' names no owner: it was called outside an owner scope ` +
        `and without { owner }, where every acquire() is a holder of its own, so it cannot tell ` +
        `whose hold to release and released none (Redis unchanged). Release through the HeldLock ` +
        `that acquire() returned (held.release()), inside lock.withLock() or runAsOwner(), or ` +
        `with an explicit owner: lock.release({ owner })`,
      { lockName: this.name },
    )
  }

  /** @internal Releases one hold of `owner` in Redis. */
  _release(owner: number): Promise<boolean> {
    return viaNative(() => this.#native.release(owner))
  }

  /** @internal Whether core recorded the hold of `owner` as lost. */
  _isLost(owner: number): boolean {
    return viaNative(() => this.#native.isLost(owner))
  }
}

/**
 * One acquisition of a {@link Lock}: what `acquire()` resolves to. Release it exactly once, with
 * {@link HeldLock.release} or by disposal (`await using held = await lock.acquire()` where the
 * syntax is supported).
 *
 * Its {@link HeldLock.signal} aborts, with a `LockLostError` reason, as soon as the watchdog's
 * renewal finds the lock gone (it expired while Redis was out of reach, or was force-unlocked):
 * pass it to the work the lock protects.
 *
 * @example
 * ```js
 * const held = await lock.acquire()
 * try {
 *   await fetch(url, { signal: held.signal })  // stops if the lock is lost
 * } finally {
 *   await held.release()
 * }
 * ```
 */
export class HeldLock implements AsyncDisposable {
  /** The lock held. */
  readonly lock: Lock
  /** The owner number holding it (`<n>` of the holder string `<client-id>:<n>`). */
  readonly owner: number
  readonly #controller = new AbortController()
  #released = false

  /** @internal HeldLocks come from `lock.acquire()`. */
  constructor(lock: Lock, owner: number) {
    this.lock = lock
    this.owner = owner
  }

  /**
   * The holder string Redis stores for this hold: `<client-id>:<owner>`.
   *
   * @example
   * ```js
   * console.log(held.holder) // '0f1e…:12'
   * ```
   */
  get holder(): string {
    return `${this.lock.client.id}:${this.owner}`
  }

  /**
   * Aborts, with a `LockLostError` reason, when the lock is found lost.
   *
   * @example
   * ```js
   * held.signal.addEventListener('abort', () => console.error(held.signal.reason.message))
   * held.signal.throwIfAborted()
   * ```
   */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /**
   * Whether the lock was found lost (then `signal` is aborted and `release()` rejects with
   * `LockLostError`).
   *
   * @example
   * ```js
   * if (held.lost) console.error('another holder may have run meanwhile')
   * ```
   */
  get lost(): boolean {
    return this.#controller.signal.aborted
  }

  /**
   * Whether this hold was released (by `release()`, disposal, `lock.release()` as its owner, or
   * `client.close()`).
   *
   * @example
   * ```js
   * await held.release()
   * console.log(held.released) // true
   * ```
   */
  get released(): boolean {
    return this.#released
  }

  /**
   * Releases this hold, as the owner it was acquired with. Rejects with `LockLostError` if the
   * lock was lost meanwhile, and with `NotHeldError` if this hold was already released.
   *
   * @example
   * ```js
   * const held = await lock.acquire()
   * try { await doWork() } finally { await held.release() }
   * ```
   */
  async release(): Promise<void> {
    if (this.#released) {
      throw new NotHeldError(
        `this hold of lock '${this.lock.name}' by ${this.holder} was already released; release each acquisition once`,
        { lockName: this.lock.name, holder: this.holder },
      )
    }
    this.#released = true
    this.lock.client._untrack(this)
    try {
      await this.lock._release(this.owner)
    } catch (e) {
      if (hasCode(e, 'LOCK_LOST')) {
        this.lock.client._lostAll(this.lock.name, this.owner, e as LockLostError)
        this._lost(e as LockLostError)
        throw e
      }
      if (hasCode(e, 'NOT_HELD') && this.lost) throw this.signal.reason
      if (!hasCode(e, 'NOT_HELD')) {
        // Redis did not answer (core already retried within the connect timeout): the hold may
        // still be there, no longer renewed, so it expires after its lease at worst. Keep it
        // tracked so the caller can retry the release.
        this.#released = false
        this.lock.client._track(this)
      }
      throw e
    }
  }

  /**
   * Releases this hold unless it was already released, for `await using`.
   *
   * @example
   * ```js
   * {
   *   await using held = await lock.acquire()   // Node ≥ 24, TypeScript ≥ 5.2
   *   await doWork()
   * } // released here
   * ```
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.release()
  }

  /** @internal The lock was found lost. */
  _lost(reason: CrosslockError): void {
    if (!this.#controller.signal.aborted) this.#controller.abort(reason)
  }

  /** @internal The client closed, which released every hold. */
  _closed(): void {
    this.#released = true
  }
}

/** @internal The reason a lost hold's signal aborts with. */
export function lostError(lockName: string, holder: string): LockLostError {
  return new LockLostError(
    `lock '${lockName}' held by ${holder} was lost: a renewal found it gone (it expired or was ` +
      `force-unlocked), so work done since may overlap another holder. Stop the protected work ` +
      `and acquire it again`,
    { lockName, holder },
  )
}
