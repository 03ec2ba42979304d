/**
 * {@link Watch}: a live view of one object, what `npx crosslock watch NAME` prints.
 *
 * @module
 */
import type native = require('../native')
import type { Inspection, WatchEvent } from '../native'
import { viaNative } from './errors'

/**
 * A live view of one object: see {@link Client.watch}. Iterate it with `for await` to receive
 * each change as a {@link WatchEvent}; it never ends by itself. `close()` it (or `await using`
 * it) to drop its subscription connection; a loop waiting on it then ends.
 *
 * What a watch can tell apart: a hold gone right after a release message was `released`; a lock
 * held several times gone at once with one message was `force-unlocked` (a force-unlock of a lock
 * held once looks exactly like its release); a hold gone silently once its lease ran out
 * `expired`. Acquires publish nothing, so they are found by the snapshot taken at least every
 * `interval` ms.
 *
 * @example
 * ```js
 * const watch = await client.watch('orders:42')
 * setTimeout(() => watch.close(), 60_000)
 * for await (const event of watch) console.log(event.text)
 * ```
 */
export class Watch implements AsyncIterable<WatchEvent>, AsyncDisposable {
  readonly #native: native.Watch
  /** The object's name. */
  readonly name: string

  /** @internal */
  constructor(nativeWatch: native.Watch, name: string) {
    this.#native = nativeWatch
    this.name = name
  }

  /** The object as it was when the watch started. */
  get initial(): Inspection {
    return this.#native.initial
  }

  /**
   * The next change; waits as long as nothing changes. `null` once the watch is closed. Rejects
   * with `RedisUnavailableError` when no snapshot can be taken; the watch stays usable.
   */
  async next(): Promise<WatchEvent | null> {
    return await viaNative(() => this.#native.next())
  }

  /** Closes the subscription connection; a pending `next()` answers `null`. Idempotent. */
  close(): void {
    this.#native.close()
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent, void, undefined> {
    try {
      for (;;) {
        const event = await this.next()
        if (event === null) return
        yield event
      }
    } finally {
      this.close()
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close()
  }
}
