/**
 * {@link HeldLock}, the proof of one acquisition, and the registry of a client's live holds that
 * routes lost-lock signals to them.
 *
 * A hold whose owner only its `HeldLock` knows (an `acquire()` outside an owner scope without an
 * `owner` option, or `withLock`'s own hold made so) can only be released through that object. If
 * it is garbage-collected while still held, nobody can release the lock any more: a
 * `FinalizationRegistry` notices it, a warning names the lock, the holder and where it was
 * acquired (on the debug log, `NODE_DEBUG=crosslock`), and a hold the watchdog keeps (renewed for
 * ever otherwise) is released; one taken with a lease is left to expire. Holds acquired in an
 * owner scope or as an explicit owner can still be released by owner, and are left alone. The
 * registry holds its holds weakly, so that a dropped `HeldLock` can be collected at all.
 *
 * @module
 */
import { debuglog } from 'node:util'

import { LockKind } from '../native'
import type { CrosslockError } from './errors'
import { LockLostError, NotHeldError, fromNative, hasCode, invalidArgument } from './errors'
import type { Lockable } from './lockable'

/** @internal Checks the lease an extend sets (milliseconds; core checks the range). */
export function checkExtendLease(lease: unknown, lockName: string): void {
  if (typeof lease !== 'number') {
    throw invalidArgument('type', `the lease an extend of lock '${lockName}' sets must be a number of milliseconds, got ${typeof lease}`, lockName)
  }
  if (!Number.isFinite(lease) || lease < 1) {
    throw invalidArgument('range', `the lease an extend of lock '${lockName}' sets must be a finite number of milliseconds ≥ 1, got ${lease}`, lockName)
  }
}

const debug = debuglog('crosslock')

/** @internal Writes a warning on the debug log (`NODE_DEBUG=crosslock`), in its format. */
export function warn(message: string): void {
  if (debug.enabled) process.stderr.write(`CROSSLOCK ${process.pid}: warn: ${message}\n`)
}

/**
 * @internal Where the application called an acquire (`file:line:column`, the first frame outside
 * crosslock's own files), formatted at once so that it keeps no object alive; only when the debug
 * log is on, the one place a leaked-hold warning is written (it costs ~10 µs per acquire, a sixth
 * of an uncontended acquire and release).
 */
export function acquireSite(): string | undefined {
  if (!debug.enabled) return undefined
  for (const line of (new Error().stack ?? '').split('\n').slice(1)) {
    if (line.includes(__dirname) || /[( ]node:/.test(line)) continue
    const frame = line.trim().replace(/^at /, '')
    const place = /\((.*)\)$/.exec(frame)
    return place ? place[1] : frame
  }
  return undefined
}

/**
 * @internal The registry's weak reference to a hold, which is also all that its finalizer knows
 * of it (never the `HeldLock` itself: a finalizer's held value is kept strongly). One object per
 * hold, registered once and never unregistered (`live` says whether it still counts): with it a
 * hold costs ≈180 bytes of heap more than without detection (measured), and a separate record
 * plus an unregister token ~65 bytes more than that.
 */
export class HoldRef extends WeakRef<HeldLock> {
  /** Whether the client's registry lists it (acquired, not yet released nor closed). */
  live = false
  /** Whether the finalizer is registered (once per hold, never unregistered: see `live`). */
  registered = false
  constructor(
    held: HeldLock,
    readonly lock: Lockable,
    readonly owner: number,
    /** Only the `HeldLock` can release the hold (see the module docs). */
    readonly only: boolean,
    /** The watchdog keeps it (no lease, not extended). */
    public watchdog: boolean,
    /** Where it was acquired, when `only` and the debug log is on. */
    readonly site: string | undefined,
  ) {
    super(held)
  }
}

/** A hold collected: forgotten by the registry and, when only it could release the lock, reported. */
const collected = new FinalizationRegistry<HoldRef>((ref) => {
  if (!ref.live) return // released, or its client closed
  ref.lock.client._holds.forget(ref.lock, ref)
  if (ref.only) void releaseLeaked(ref.lock, ref.owner, ref.watchdog, ref.site)
})

/**
 * `lock`'s hold by `owner` was left by a `HeldLock` collected while held: warn, and release every
 * hold of that owner when the watchdog keeps it; a hold with a lease is left to expire.
 */
async function releaseLeaked(lock: Lockable, owner: number, watchdog: boolean, site: string | undefined): Promise<void> {
  const native = lock.client._native
  const holder = `${lock.client.id}:${owner}${lock._write ? ':write' : ''}`
  try {
    const count = await native.lockHoldCountOf(lock._kind, lock.name, owner)
    if (count <= 0) return // released meanwhile (as its owner, by number), expired, or closed
    warn(
      `lock '${lock.name}' was still held (${count} time(s), as ${holder}) when its HeldLock was ` +
        `garbage-collected; it was acquired at ${site ?? '<unknown>'}. ` +
        `${watchdog ? 'Releasing it' : 'Leaving it to expire after its lease'}: release every hold ` +
        `before dropping it (held.release(), lock.withLock() or await using)`,
    )
    if (!watchdog) return
    for (let i = 0; i < count; i++) if (!(await native.lockRelease(lock._kind, lock.name, owner))) break
  } catch (raw) {
    // A closed client, Redis out of reach, the lock lost: nothing more to release from here.
    warn(`could not release lock '${lock.name}' left held by a garbage-collected HeldLock (${holder}): ${String((fromNative(raw) as Error)?.message ?? raw)}`)
  }
}

/**
 * One acquisition of a lock: what `acquire()` resolves to. Release it exactly once, with
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
  readonly lock: Lockable
  /** The owner number holding it (`<n>` of the holder string `<client-id>:<n>`). */
  readonly owner: number
  /**
   * The fencing token of this acquisition, for a `FencedLock`: strictly greater than every token
   * handed out before on the lock, by any client in any language. `undefined` for other kinds.
   */
  readonly token: bigint | undefined
  /** Made on the first read of `signal` (most holds never read it): an AbortController per hold
   * costs more than the rest of the hold. */
  #controller: AbortController | undefined
  /** Why the hold may be lost, once it may be. */
  #lostReason: CrosslockError | undefined
  #released = false
  /** @internal What the registry and the finalizer know of this hold. */
  readonly _ref: HoldRef

  /**
   * @internal HeldLocks come from `lock.acquire()`. `only`: the hold can only be released through
   * this object (see the module docs); `watchdog`: no lease; `site`: where it was acquired.
   */
  constructor(lock: Lockable, owner: number, token: bigint | undefined, only: boolean, watchdog: boolean, site: string | undefined) {
    this.lock = lock
    this.owner = owner
    this.token = token
    this._ref = new HoldRef(this, lock, owner, only, watchdog, site)
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
    return `${this.lock.client.id}:${this.owner}${this.lock._write ? ':write' : ''}`
  }

  /**
   * Aborts, with a `LockLostError` reason, when the lock may be lost: a renewal found it gone,
   * or no renewal was confirmed before its last confirmed lease ran out (Redis unreachable, a
   * partition, a paused process), or an explicit lease ran out while it was held. It aborts at
   * the latest when another client could take the lock, whether or not Redis answers. Reading it
   * checks the hold's deadline against the clock first (no round trip), so `held.signal.aborted`
   * and `held.signal.throwIfAborted()` are true at once after a pause past the deadline, before
   * the watchdog has run.
   *
   * @example
   * ```js
   * held.signal.addEventListener('abort', () => console.error(held.signal.reason.message))
   * held.signal.throwIfAborted()
   * ```
   */
  get signal(): AbortSignal {
    this.#check()
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#lostReason !== undefined) this.#controller.abort(this.#lostReason)
    }
    return this.#controller.signal
  }

  /**
   * Whether the lock may be lost (then `signal` is aborted and `release()` rejects with
   * `LockLostError`). Each read decides from the clock (no round trip): once the last confirmed
   * lease's deadline has passed it is true at once, even on the first statement after the process
   * resumes from a pause, and `signal` has aborted.
   *
   * @example
   * ```js
   * if (held.lost) console.error('another holder may have run meanwhile')
   * ```
   */
  get lost(): boolean {
    this.#check()
    return this.#lostReason !== undefined
  }

  /** A live hold not known lost asks core, which decides from the hold's deadline on the spot
   * (and tells the other holds of its route, as the lost-lock event would). */
  #check(): void {
    if (this.#lostReason !== undefined || this.#released) return
    let lost = false
    try {
      lost = this.lock._isLost(this.owner)
    } catch {
      return // a closed client: nothing more to find
    }
    if (lost) {
      this.lock.client._holds.lostAll(this.lock, this.owner, lostError(this.lock.name, this.holder))
    }
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
   * lock was lost meanwhile (at once when `lost` is already true, without waiting for Redis: the
   * release still runs in the background, as a clean-up), and with `NotHeldError` if this hold
   * was already released.
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
    this.lock.client._holds.untrack(this)
    try {
      // The native promise awaited here (one promise less per release than through a wrapper).
      await this.lock._release(this.owner)
    } catch (raw) {
      const e = fromNative(raw)
      if (hasCode(e, 'LOCK_LOST')) {
        this.lock.client._holds.lostAll(this.lock, this.owner, e as LockLostError)
        this._lost(e as LockLostError)
        throw e
      }
      if (hasCode(e, 'NOT_HELD') && this.#lostReason !== undefined) throw this.#lostReason
      if (!hasCode(e, 'NOT_HELD')) {
        // Redis did not answer (core already retried within the connect timeout): the hold may
        // still be there, no longer renewed, so it expires after its lease at worst. Keep it
        // tracked so the caller can retry the release.
        this.#released = false
        this.lock.client._holds.track(this)
      }
      throw e
    }
  }

  /**
   * Sets the lease of this hold to `lease` milliseconds from now, shorter or longer than what was
   * left: the lock expires then unless extended again or released. A hold kept by the watchdog
   * becomes one with that lease (the watchdog stops renewing it, every re-entrant hold of its
   * owner included), and `signal` aborts if it is still held when the lease runs out. A Redisson
   * client sees the new lease.
   *
   * Rejects with `NotHeldError` when this hold was released, with `LockLostError` when it is lost
   * (expired or force-unlocked: `lost` is then true and `signal` aborted), and with
   * `InvalidArgumentError` for a lease that is not a finite number ≥ 1.
   *
   * @param lease - the new lease in milliseconds, from now
   *
   * @example
   * ```js
   * const held = await lock.acquire({ lease: 10_000 })
   * try {
   *   for (const batch of work) {
   *     await process(batch)
   *     await held.extend(10_000) // another 10 s from now
   *   }
   * } finally { await held.release() }
   * ```
   */
  async extend(lease: number): Promise<void> {
    checkExtendLease(lease, this.lock.name)
    if (this.#released) {
      throw new NotHeldError(
        `cannot extend lock '${this.lock.name}': this hold by ${this.holder} was already released; acquire it again`,
        { lockName: this.lock.name, holder: this.holder },
      )
    }
    try {
      await this.lock._extend(this.owner, lease)
      // Its lease ends it now, if left behind.
      this._ref.watchdog = false
    } catch (raw) {
      const e = fromNative(raw)
      if (hasCode(e, 'LOCK_LOST')) {
        this.lock.client._holds.lostAll(this.lock, this.owner, e as LockLostError)
        this._lost(e as LockLostError)
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
    if (this.#lostReason !== undefined) return
    this.#lostReason = reason
    this.#controller?.abort(reason)
  }

  /** @internal The client closed, which released every hold. */
  _closed(): void {
    this.#released = true
    this._ref.live = false
  }
}

/** @internal The reason a lost hold's signal aborts with. */
export function lostError(lockName: string, holder: string): LockLostError {
  return new LockLostError(
    `lock '${lockName}' held by ${holder} may be lost: a renewal found it gone (it expired or was ` +
      `force-unlocked), or no renewal was confirmed before its lease ran out (Redis out of reach), ` +
      `so work done from now on may overlap another holder. Stop the protected work and acquire it again`,
    { lockName, holder },
  )
}

/** The route of a hold's lost-lock events: its lock's name, and whether it is a write hold. */
function route(lock: Lockable): string {
  return lock._write ? `${lock._key}\u0000w` : lock._key
}

/**
 * The live holds of one client, oldest first per lock: for lost-lock signals, for
 * `lock.release()` by owner, and for `client.close()`. Held weakly (a `HeldLock` dropped while held
 * must be collectable, see the module docs); each is forgotten when released or collected. A route
 * held once (the common case, and every route of a process holding many locks) maps to its hold's
 * reference itself; an array only when it has several. @internal
 */
export class Holds {
  readonly #byRoute = new Map<string, HoldRef | HoldRef[]>()

  track(held: HeldLock): void {
    const ref = held._ref
    ref.live = true
    if (!ref.registered) {
      ref.registered = true
      collected.register(held, ref)
    }
    const key = route(held.lock)
    const known = this.#byRoute.get(key)
    if (known === undefined) this.#byRoute.set(key, ref)
    else if (Array.isArray(known)) known.push(ref)
    else this.#byRoute.set(key, [known, ref])
  }

  untrack(held: HeldLock): void {
    held._ref.live = false
    this.forget(held.lock, held._ref)
  }

  /** Forgets the hold of `lock` that `ref` refers to (released, or collected). */
  forget(lock: Lockable, ref: HoldRef): void {
    const key = route(lock)
    const known = this.#byRoute.get(key)
    if (known === ref) {
      this.#byRoute.delete(key)
    } else if (Array.isArray(known)) {
      const i = known.lastIndexOf(ref)
      if (i >= 0) known.splice(i, 1)
      if (known.length === 1) this.#byRoute.set(key, known[0]!)
      else if (known.length === 0) this.#byRoute.delete(key)
    }
  }

  /** The live holds of a route, oldest first. */
  #of(key: string): HeldLock[] {
    const known = this.#byRoute.get(key)
    if (known === undefined) return []
    if (!Array.isArray(known)) {
      const held = known.deref()
      return held === undefined ? [] : [held]
    }
    const live: HeldLock[] = []
    for (const ref of known) {
      const held = ref.deref()
      if (held !== undefined) live.push(held)
    }
    return live
  }

  /** The latest live hold of `lock` by `owner`. */
  latestOf(lock: Lockable, owner: number): HeldLock | undefined {
    const list = this.#of(route(lock))
    for (let i = list.length - 1; i >= 0; i--) if (list[i]!.owner === owner) return list[i]
    return undefined
  }

  /** Aborts every live hold of `lock`'s route by `owner`. */
  lostAll(lock: Lockable, owner: number, reason: CrosslockError): void {
    for (const held of this.#of(route(lock))) if (held.owner === owner) held._lost(reason)
  }

  /** A hold of (`name`, write or not) by `owner` may be lost: abort their signals. */
  onLost(clientId: string, name: string, owner: number, kind: LockKind): void {
    const write = kind === LockKind.WriteLock
    const holds = this.#of(write ? `${name}\u0000w` : name).filter((h) => h.owner === owner)
    // Skip a stale report about an earlier tenure that was released since.
    if (holds.length === 0 || !holds[0]!.lock._isLost(owner)) return
    const reason = lostError(holds[0]!.lock.name, `${clientId}:${owner}${write ? ':write' : ''}`)
    for (const held of holds) held._lost(reason)
  }

  /** Every live hold, forgotten: the client closed, which released them. */
  closeAll(): void {
    const all = [...this.#byRoute.values()].flat()
    this.#byRoute.clear()
    for (const ref of all) {
      ref.live = false
      ref.deref()?._closed()
    }
  }
}
