/**
 * {@link Lock}: Redisson's `RLock`.
 *
 * @module
 */
import { Lockable } from './lockable'

/**
 * A reentrant distributed lock, stored in Redis exactly as Redisson's `RLock`: a hash at the
 * lock's name with one field, `<client-id>:<owner>` → hold count, and a TTL (the lease); a release
 * publishes `0` on `redisson_lock__channel:{name}`. A Java service calling Redisson's
 * `getLock(name)`, a Python worker or a Rust daemon on the same name takes part in the same
 * exclusion.
 *
 * Get one from `client.lock(name)`. Everything about acquiring, holding and releasing is
 * described on {@link Lockable}.
 *
 * @example
 * ```js
 * const lock = client.lock('orders:42')
 * const held = await lock.acquire({ wait: 2000 })   // rejects with LockTimeoutError after 2 s
 * try {
 *   // exclusive work; held.signal aborts if the lock may be lost
 * } finally {
 *   await held.release()
 * }
 * ```
 */
export class Lock extends Lockable {}
