/**
 * {@link Lockable}: what every lock of the RLock family does in Node — {@link Lock},
 * `FairLock`, `SpinLock`, `FencedLock`, `NonReentrantLock`, `NonReentrantFairLock`, and the read and write locks of a
 * `ReadWriteLock` are short subclasses of it with their own docs and extras.
 *
 * One native lock type serves every kind; owner scopes, `AbortSignal`, `withLock`, the hold registry
 * and the lost-lock signal are all here, once.
 *
 * @module
 */
import { type BackoffOptions, LockKind } from '../native'
import type { Client } from './client'
import { cancellable } from './abort'
import { NotHeldError, fromNative, invalidArgument, viaNative } from './errors'
import { HeldLock, acquireSite, checkExtendLease } from './held'
import { acquiringOwner, checkOwner, currentOwner, inScope } from './identity'
import { type Checked, checkAcquire, optionsObject } from './args'

/**
 * How to acquire a lock. Durations are milliseconds, as for `setTimeout`. A key it does not
 * name is refused with `InvalidArgumentError`, not ignored: `{ timeout: 5000 }` (the wait is
 * `wait`) would otherwise wait forever.
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
   * `tryAcquire()` resolves `null`: Redis answered, the lock was busy. When it passes with Redis
   * out of reach (no attempt answered, or Redis gone at the end), both reject with
   * `RedisUnavailableError` (`UNAVAILABLE`) instead. A single try is bounded by the response
   * timeout.
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

function checkOwnerOption(options: unknown, lockName: string): number | undefined {
  const o = optionsObject(options, `lock '${lockName}'`, ['owner'], lockName)
  return o.owner === undefined || o.owner === null ? undefined : checkOwner(o.owner, lockName)
}

/**
 * The behaviour every lock of the RLock family shares (see the module docs); each subclass
 * documents its kind. Who holds a lock is decided by the owner rules of `runAsOwner`: outside an
 * owner scope each `acquire()` is its own holder; inside `withLock` (or `runAsOwner`) nested
 * acquires re-enter (unless the kind does not re-enter).
 *
 * `H` is what `acquire()` resolves to: a {@link HeldLock}, whose `token` is a `bigint` for a
 * fenced lock.
 *
 * @example
 * ```js
 * const lock = client.lock('orders:42')              // any lock of the family works alike
 * const held = await lock.acquire({ wait: 2000 })   // rejects with LockTimeoutError after 2 s
 * try {
 *   // exclusive work; held.signal aborts if the lock may be lost
 * } finally {
 *   await held.release()
 * }
 * ```
 */
export abstract class Lockable<H extends HeldLock = HeldLock> {
  /** The client this lock belongs to. */
  readonly client: Client
  /** The lock's name: its key in Redis. */
  readonly name: string
  /**
   * @internal Its kind (the native `LockKind`, numbered by core's table of kinds). A lock is plain JavaScript, its kind and name: the
   * native client makes the lock for each call it is given (a few small allocations), and a hold
   * keeps only its name and kind, from which renewing and releasing it are made. A native object per lock, or an entry in a native
   * table freed through a `FinalizationRegistry`, cost ~0.5 KB per lock object, more than a
   * held lock's own state, in a process that may make tens of thousands.
   */
  readonly _kind: LockKind
  /**
   * @internal What the native client makes the lock from, and its holds' name: the name, but for
   * a group lock, whose holds are one per set of values (`<group>#<field>,<field>…`).
   */
  readonly _key: string

  /** @internal Locks come from the client's factories (`client.lock(name)`, …). */
  constructor(client: Client, kind: LockKind, name: string, key: string = name) {
    this.client = client
    this._kind = kind
    this.name = name
    this._key = key
  }

  /** @internal Whether its holder strings end in `:write` (the route of lost-lock events). */
  get _write(): boolean {
    return this._kind === LockKind.WriteLock
  }

  /** @internal A spin lock's back-off (`undefined`: Redisson's, or not a spin lock). */
  get _backoff(): BackoffOptions | undefined {
    return undefined
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
  acquire(options?: AcquireOptions): Promise<H> {
    return this.#acquire(options, null, true) as Promise<H>
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
  tryAcquire(options?: AcquireOptions): Promise<H | null> {
    return this.#acquire(options, 0, false)
  }

  /**
   * The one async function of an acquire (the public methods return its promise as it is: one
   * more async layer costs a promise and a turn of the microtask queue per call). Bad options
   * reject it, as they would an `async acquire()`. `checked`: options already checked.
   */
  async #acquire(
    options: unknown,
    defaultWait: number | null,
    failOnTimeout: boolean,
    checked?: Checked,
    fresh?: boolean,
  ): Promise<H | null> {
    const o = checked ?? checkAcquire(options, `lock '${this.name}'`, this.name, defaultWait)
    // An owner made for this acquire alone: only the HeldLock can release the hold.
    const only = fresh ?? (o.owner === undefined && currentOwner() === undefined)
    const site = only ? acquireSite() : undefined
    const owner = acquiringOwner(o.owner)
    let acquired: bigint | null
    if (o.signal === undefined) {
      // Nothing to abort: the native promise awaited right here, without the promises that
      // honouring a signal takes (most acquires have none).
      try {
        acquired = await this.client._native.lockAcquire(this._kind, this._key, this._backoff, owner, o.wait, o.lease, null, failOnTimeout)
      } catch (e) {
        throw fromNative(e)
      }
    } else {
      acquired = await cancellable(
        o.signal,
        (token) => this.client._native.lockAcquire(this._kind, this._key, this._backoff, owner, o.wait, o.lease, token, failOnTimeout),
        (won) => won !== null,
        () => viaNative(() => this._release(owner)),
      )
    }
    if (acquired === null) return null
    const held = new HeldLock(this, owner, this._token(acquired), only, o.lease === null, site) as H
    this.client._holds.track(held)
    return held
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
    const held = this.client._holds.latestOf(this, owner)
    if (held) return held.release()
    await viaNative(() => this._release(owner))
  }

  /**
   * Sets the lease of an owner's hold to `lease` milliseconds from now, as
   * {@link HeldLock.extend} does: the `owner` option's, else the enclosing owner scope's
   * (`withLock`, `runAsOwner`). Outside a scope and without `owner`, extend the {@link HeldLock}
   * instead (rejects with `NotHeldError` saying so, Redis unchanged).
   *
   * Rejects with `NotHeldError` when that owner does not hold the lock, with `LockLostError` when
   * it held it but the hold is lost (expired or force-unlocked), and with `InvalidArgumentError`
   * for a lease that is not a finite number ≥ 1.
   *
   * @param lease - the new lease in milliseconds, from now
   * @param options - `owner`
   *
   * @example
   * ```js
   * await lock.withLock(async () => {
   *   await step1()
   *   await lock.extend(30_000) // the scope's hold: 30 s from now, no more watchdog
   *   await step2()
   * })
   * ```
   */
  async extend(lease: number, options?: OwnerOptions): Promise<void> {
    checkExtendLease(lease, this.name)
    const owner = checkOwnerOption(options, this.name) ?? currentOwner()
    if (owner === undefined) {
      throw new NotHeldError(
        `lock.extend() of lock '${this.name}' names no owner: it was called outside an owner scope ` +
          `and without { owner }, where every acquire() is a holder of its own, so it cannot tell ` +
          `whose hold to extend and extended none (Redis unchanged). Extend the HeldLock that ` +
          `acquire() returned (held.extend(ms)), or call it inside lock.withLock() or runAsOwner(), ` +
          `or with an explicit owner: lock.extend(ms, { owner })`,
        { lockName: this.name },
      )
    }
    const held = this.client._holds.latestOf(this, owner)
    if (held) return held.extend(lease)
    await viaNative(() => this._extend(owner, lease))
  }

  /** @internal Extends the hold of `owner` in Redis (the native promise as it is). */
  _extend(owner: number, lease: number): Promise<void> {
    return this.client._native.lockExtend(this._kind, this._key, owner, lease)
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
  async withLock<T>(fn: (held: H) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== 'function') {
      throw invalidArgument('type', `withLock(fn): fn must be a function, got ${typeof fn} (lock '${this.name}')`, this.name)
    }
    const o = checkAcquire(options, `lock '${this.name}'`, this.name, null)
    const fresh = o.owner === undefined && currentOwner() === undefined
    const owner = acquiringOwner(o.owner)
    return inScope(owner, async () => {
      const held = (await this.#acquire(undefined, null, true, { ...o, owner }, fresh)) as H
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
    return viaNative(() => this.client._native.lockIsLocked(this._kind, this._key))
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
    return viaNative(() => this.client._native.lockIsHeldBy(this._kind, this._key, owner))
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
    return viaNative(() => this.client._native.lockHoldCountOf(this._kind, this._key, owner))
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
    return viaNative(() => this.client._native.lockRemainingLease(this._kind, this._key))
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
    return viaNative(() => this.client._native.lockForceUnlock(this._kind, this._key))
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

  /** @internal Releases one hold of `owner` in Redis (the native promise as it is). */
  _release(owner: number): Promise<boolean> {
    return this.client._native.lockRelease(this._kind, this._key, owner)
  }

  /** @internal Whether core recorded the hold of `owner` as lost. */
  _isLost(owner: number): boolean {
    return viaNative(() => this.client._native.lockIsLost(this._kind, this._key, owner))
  }

  /** @internal The token a hold keeps from what the native acquire resolved (none by default). */
  _token(_acquired: bigint): bigint | undefined {
    return undefined
  }

  /**
   * The holder strings (`<client-id>:<owner>`, `…:write` for a writer) holding it now.
   *
   * @example
   * ```js
   * console.log(await lock.holders()) // [ '0f1e…:12' ]
   * ```
   */
  async holders(): Promise<string[]> {
    return viaNative(() => this.client._native.lockHolders(this._kind, this._key))
  }
}

