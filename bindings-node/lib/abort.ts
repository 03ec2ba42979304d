/**
 * The one way a crosslock call honours an `AbortSignal`: a native `CancelToken` cancelled on
 * abort, the signal's reason as the rejection, and a win that raced the abort given back.
 *
 * @module
 * @internal
 */
import native = require('../native')
import { hasCode, viaNative } from './errors'

/**
 * Runs `run` with a cancel token tied to `signal`. Rejects with `signal.reason` when it aborts
 * (before, or during the wait); if the call won just as the signal aborted, `giveBack(value)` runs
 * first. `isWin` tells a win from a "not acquired" answer.
 * @internal
 */
export async function cancellable<T>(
  signal: AbortSignal | undefined,
  run: (token: native.CancelToken | null) => Promise<T>,
  isWin: (value: T) => boolean,
  giveBack: (value: T) => Promise<unknown>,
): Promise<T> {
  if (signal?.aborted) throw signal.reason
  let token: native.CancelToken | null = null
  const onAbort = () => token?.cancel()
  if (signal) {
    token = new native.CancelToken()
    signal.addEventListener('abort', onAbort, { once: true })
  }
  try {
    const value = await viaNative(() => run(token))
    if (signal?.aborted && isWin(value)) {
      // Aborted while the winning attempt was in flight: give it back, as promised.
      await giveBack(value).catch(() => {})
      throw signal.reason
    }
    return value
  } catch (e) {
    if (signal?.aborted && hasCode(e, 'CANCELLED')) throw signal.reason
    throw e
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}
