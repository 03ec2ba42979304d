/**
 * {@link SpinLock}: Redisson's `RSpinLock`.
 *
 * @module
 */
import type { BackoffOptions, LockKind } from '../native'
import type { Client } from './client'
import { Lockable } from './lockable'

/**
 * How long a {@link SpinLock} waiter pauses between attempts, in milliseconds: exponential
 * (Redisson's default: 1 ms doubling, with jitter, up to 128 ms) or constant.
 *
 * @example
 * ```js
 * client.spinLock('jobs', { backoff: { kind: 'constant', initial: 64 } })
 * client.spinLock('jobs', { backoff: { kind: 'exponential', initial: 1, max: 128 } })
 * ```
 */
export type Backoff = { kind: 'exponential'; initial: number; max: number } | { kind: 'constant'; initial: number }

/**
 * Options of `client.spinLock()`.
 *
 * @example
 * ```js
 * const lock = client.spinLock('jobs', { backoff: { kind: 'constant', initial: 64 } })
 * ```
 */
export interface SpinLockOptions {
  /** The pause between attempts; Redisson's exponential default when left out. */
  backoff?: Backoff | undefined
}

/**
 * A reentrant lock whose waiters never subscribe: they retry with a back-off instead. Stored
 * exactly as Redisson's `RSpinLock` (the `RLock` hash; a release publishes nothing), so it
 * excludes `Lock` holders of the same name.
 *
 * Use it where pub/sub is scarce or costly (very many waiting processes, a proxy or managed
 * service without pub/sub, a large cluster); the price is hand-off latency: a waiter notices a
 * release at its next retry.
 *
 * @example
 * ```js
 * await client.spinLock('reports:nightly').withLock(async () => work()) // ...
 * ```
 */
export class SpinLock extends Lockable {
  /** @internal Its back-off, as checked by its factory (`undefined`: Redisson's). */
  readonly #backoff: BackoffOptions | undefined

  /** @internal Spin locks come from `client.spinLock(name, options)`. */
  constructor(client: Client, kind: LockKind, name: string, backoff?: BackoffOptions) {
    super(client, kind, name)
    this.#backoff = backoff
  }

  /** @internal */
  override get _backoff(): BackoffOptions | undefined {
    return this.#backoff
  }
}
