/**
 * {@link NonReentrantLock}: Redisson's non-reentrant lock.
 *
 * @module
 */
import { Lockable } from './lockable'

/**
 * A lock its holder cannot re-enter: a second acquire by the same owner (inside `withLock`, or
 * with the same explicit `owner`) rejects at once with `NonReentrantError`, naming the lock,
 * instead of waiting for itself forever. Stored exactly as Redisson's non-reentrant lock (the
 * `RLock` hash and channel), so it excludes `Lock` holders of the same name.
 *
 * @example
 * ```js
 * const lock = client.nonReentrantLock('payments:7')
 * await lock.withLock(async () => {
 *   await lock.acquire() // rejects: NonReentrantError
 * })
 * ```
 */
export class NonReentrantLock extends Lockable {}
