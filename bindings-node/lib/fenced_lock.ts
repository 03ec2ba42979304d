/**
 * {@link FencedLock}: Redisson's `RFencedLock`.
 *
 * @module
 */
import type { HeldLock } from './held'
import { Lockable } from './lockable'

/**
 * A hold of a {@link FencedLock}: its `token` is always there.
 *
 * @example
 * ```js
 * const held = await client.fencedLock('ledger').acquire()
 * console.log(typeof held.token) // 'bigint'
 * await held.release()
 * ```
 */
export type FencedHeldLock = HeldLock & { readonly token: bigint }

/**
 * A reentrant lock whose every acquisition gets a **fencing token** (`held.token`, a `bigint`):
 * strictly greater than every token handed out before on this lock, by any client in any
 * language. Stored exactly as Redisson's `RFencedLock`: the `RLock` hash and channel, and a
 * counter at `redisson_lock_token:{name}` taken on every acquisition (re-entries included).
 *
 * A lock alone cannot stop a holder that lost it without knowing (a long pause, a partition) from
 * writing after someone else took over; fencing can: send the token with every write to the
 * protected resource, and have it refuse a token older than the newest it has seen.
 *
 * @example
 * ```js
 * const lock = client.fencedLock('ledger')
 * await lock.withLock(async (held) => {
 *   await storage.write(row, { fencingToken: held.token })
 * })
 * ```
 */
export class FencedLock extends Lockable<FencedHeldLock> {
  /** @internal */
  override _token(acquired: bigint): bigint {
    return acquired
  }
}
