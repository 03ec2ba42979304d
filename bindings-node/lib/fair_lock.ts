/**
 * {@link FairLock}: Redisson's `RFairLock`.
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
