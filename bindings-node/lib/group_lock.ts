/**
 * {@link GroupLock}: Redisson's `getMultiLock(group, values)` (`RedissonFasterMultiLock`).
 *
 * @module
 */
import type { Client } from './client'
import { LockKind } from '../native'
import { Lockable } from './lockable'

/**
 * Many values of one group locked at once, all or none, shared with Java services calling
 * Redisson's `redisson.getMultiLock(group, values)`. Redis holds one hash at the group's name;
 * each value is a field named by a hash of the value as the Java codec encodes it (`codec`:
 * `'kryo5'`, Redisson's default, or `'string'` for a Redisson configured with `StringCodec`).
 * Sets that share a value exclude each other; disjoint sets of one group do not. A release
 * publishes `0` on `redisson_lock__channel:{group}`. {@link Lockable.name} is the group.
 *
 * @example
 * ```js
 * const lock = client.groupLock('orders', ['42', '43'])
 * await lock.withLock(async () => {
 *   // orders 42 and 43 are ours; order 44 stays free for others
 * })
 * ```
 */
export class GroupLock extends Lockable {
  /** The hash fields of its values, sorted (Redisson's names for them). */
  readonly fields: readonly string[]

  /** @internal From {@link Client.groupLock}. */
  constructor(client: Client, group: string, fields: readonly string[]) {
    super(client, LockKind.GroupLock, group, `${group}#${fields.join(',')}`)
    this.fields = Object.freeze([...fields])
  }
}
