/**
 * {@link CountDownLatch}: Redisson's `RCountDownLatch`.
 *
 * @module
 */
import native = require('../native')
import { cancellable } from './abort'
import type { Client } from './client'
import { viaNative } from './errors'
import { checkAcquire } from './args'
import { checkWhole } from './limits'

/**
 * A count-down latch shared by every process (Node, Python, Rust, Java on Redisson) using the
 * same name on the same Redis: waiters wait until the count reaches zero; anyone counts down.
 * Stored exactly as Redisson's `RCountDownLatch`: the count at the name, and the channel
 * `redisson_countdownlatch__channel__{name}` on which `0` is published at zero (every waiter
 * wakes). An absent count means open.
 *
 * A waiter subscribes before it looks at the count, so a latch that opens meanwhile is never
 * missed (Redisson's untimed `await()` can miss it and wait for ever).
 *
 * @example
 * ```js
 * const ready = client.countDownLatch('workers-ready')
 * await ready.trySetCount(3)       // the coordinator
 * await ready.countDown()          // each of 3 workers, anywhere
 * await ready.wait({ wait: 30_000 })   // anyone: resolves once all 3 counted down
 * ```
 */
export class CountDownLatch {
  /** The client it belongs to. */
  readonly client: Client
  /** The latch's name: its key in Redis. */
  readonly name: string
  readonly #native: native.CountDownLatch

  /** @internal Made by `client.countDownLatch(name)`. */
  constructor(client: Client, nativeLatch: native.CountDownLatch) {
    this.client = client
    this.#native = nativeLatch
    this.name = nativeLatch.name
  }

  /**
   * Sets the count (≥ 1) unless the latch is counting; resolves whether it did.
   *
   * @example
   * ```js
   * await latch.trySetCount(3)
   * ```
   */
  async trySetCount(count: number): Promise<boolean> {
    const n = checkWhole(count, 'latch_count', `trySetCount: the count of latch '${this.name}'`, this.name)
    return viaNative(() => this.#native.trySetCount(n))
  }

  /**
   * Counts down by one (anyone may); at zero every waiter wakes. Resolves the count left.
   *
   * @example
   * ```js
   * await latch.countDown()
   * ```
   */
  async countDown(): Promise<number> {
    return viaNative(() => this.#native.countDown())
  }

  /**
   * The count now (0: open).
   *
   * @example
   * ```js
   * console.log(await latch.count())
   * ```
   */
  async count(): Promise<number> {
    return viaNative(() => this.#native.count())
  }

  /**
   * Waits until the count reaches zero, as long as it takes or `wait` ms; rejects with
   * `LockTimeoutError` when `wait` passes, with the signal's reason when `signal` aborts.
   *
   * @example
   * ```js
   * await latch.wait({ wait: 10_000, signal })
   * ```
   */
  async wait(options?: { wait?: number | undefined; signal?: AbortSignal | undefined }): Promise<void> {
    const o = checkAcquire(options, `latch '${this.name}'`, this.name, null, ['wait', 'signal'])
    await cancellable(o.signal, (token) => this.#native.wait(o.wait, token, true), () => false, async () => {})
  }

  /**
   * Deletes the latch; resolves whether it existed.
   *
   * @example
   * ```js
   * await latch.delete()
   * ```
   */
  async delete(): Promise<boolean> {
    return viaNative(() => this.#native.delete())
  }
}
