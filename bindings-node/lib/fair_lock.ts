/**
 * {@link FairLock}: Redisson's `RFairLock`, and {@link NonReentrantFairLock}, its non-reentrant variant.
 *
 * @module
 */
import { Lockable } from './lockable'

/**
 * A reentrant lock handed over in the order its waiters asked, across processes and languages.
 * Stored exactly as Redisson's `RFairLock`: the `RLock` hash at the name, a FIFO list of waiters
 * at `redisson_lock_queue:{name}`, their deadlines at `redisson_lock_timeout:{name}`, and a
 * channel per waiter on which a release wakes only the head of the queue (no thundering herd).
 *
 * A waiter that gives up (its `wait` passed, its `signal` aborted, its worker ended) leaves the
 * queue at once; one that crashes is skipped once its deadline passes (the client's
 * `fairLockWaitTimeout`, 5 minutes by default, or the waiter's own `wait`). Unlike Redisson's, a
 * live crosslock waiter keeps its place however long it waits.
 *
 * @example
 * ```js
 * const lock = client.fairLock('printer')
 * await lock.withLock(async () => work()) // served in the order of asking
 * ```
 */
export class FairLock extends Lockable {}

/**
 * A {@link FairLock} its holder cannot re-enter (Redisson 4.4's non-reentrant fair lock,
 * `getNonReentrantFairLock`): a second acquire by the same owner (inside `withLock`, or with the
 * same explicit `owner`) rejects at once with `NonReentrantError`, naming the lock, as a
 * `NonReentrantLock` does. Stored exactly as a `FairLock` (the same hash, queue, deadlines and
 * per-waiter channels), so it queues in one line with `FairLock` waiters of the same name, in any
 * language and in Redisson.
 *
 * @example
 * ```js
 * const lock = client.nonReentrantFairLock('printer')
 * await lock.withLock(async () => {
 *   await lock.acquire() // rejects: NonReentrantError
 * })
 * ```
 */
export class NonReentrantFairLock extends Lockable {}
