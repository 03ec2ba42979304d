/// <reference lib="esnext.disposable" preserve="true" />
/**
 * crosslock for Node.js: distributed locks on a plain Redis server, stored exactly as Java's
 * Redisson stores them, so Node, Python, Rust and Java (Redisson) processes share the very same
 * locks.
 *
 * @example
 * ```js
 * const { connect } = require('crosslock')
 *
 * const client = await connect('redis://127.0.0.1:6379/0')
 * const lock = client.lock('orders:42')
 *
 * const held = await lock.acquire({ wait: 2000 })    // ms; rejects with LockTimeoutError after 2 s
 * try {
 *   held.signal.throwIfAborted()                      // aborts if renewal finds the lock gone
 * } finally {
 *   await held.release()
 * }
 *
 * await lock.withLock(async () => {
 *   // exclusive; always released
 * })
 * await client.close()
 * ```
 *
 * @module
 */
import { Client, type ConnectOptions } from './client'

export { Client, type ConnectOptions, type GroupLockOptions, type MetricsMeterProvider, type SpansTracerProvider } from './client'
export type { Inspection, HolderInfo, ProcessInfo, QueuedWaiter, PermitInfo, WatchEvent } from '../native'
export { Watch } from './watch'
export { Lockable, type AcquireOptions, type OwnerOptions } from './lockable'
export { HeldLock } from './held'
export { Lock } from './lock'
export { FairLock, NonReentrantFairLock } from './fair_lock'
export { SpinLock, type Backoff, type SpinLockOptions } from './spin_lock'
export { FencedLock, type FencedHeldLock } from './fenced_lock'
export { NonReentrantLock } from './non_reentrant_lock'
export { GroupLock } from './group_lock'
export { ReadWriteLock, ReadLock, WriteLock } from './read_write_lock'
export { MultiLock, RedLock, HeldMultiLock } from './multi_lock'
export { Semaphore, type PermitOptions } from './semaphore'
export { PermitExpirableSemaphore, Permit, type PermitAcquireOptions } from './permit_expirable_semaphore'
export { CountDownLatch } from './count_down_latch'
export { runAsOwner, newOwner, currentOwner } from './identity'
export {
  CrosslockError,
  NotHeldError,
  LockTimeoutError,
  LockLostError,
  RedisUnavailableError,
  WrongTypeError,
  InvalidArgumentError,
  AuthenticationError,
  NonReentrantError,
  UpgradeRefusedError,
  ERROR_CODES,
  type ErrorCode,
  type CrosslockErrorOptions,
} from './errors'

/**
 * Connects to Redis and resolves to a {@link Client} once the connections are up.
 *
 * `url` is `redis://[user:password@]host:port/db`, or `rediss://…` for TLS. For Sentinel it is
 * `redis+sentinel://[user:password@]host:port[,host:port…]/<master name>[/db]` (the hosts are the
 * sentinels; `?sentinel_password=…` for the sentinels' own password), and the client follows the
 * master through failovers. For Cluster it is `redis+cluster://[user:password@]host:port[,host:port…]`
 * (seed nodes; `?sharded_pubsub=auto|on|off`, `auto` as Redisson's default). Rejects with
 * `RedisUnavailableError` (naming the address) when the server cannot be reached within
 * `connectTimeout`, and `InvalidArgumentError` for a malformed URL or options.
 *
 * @param url - where Redis is
 * @param options - `connectTimeout`, `responseTimeout`, `watchdogTimeout` (ms), `watchdogBatchSize`,
 *   …, and `metrics` (`true` or an OpenTelemetry `MeterProvider`: see {@link ConnectOptions.metrics})
 *
 * @example
 * ```js
 * const { connect } = require('crosslock')
 * const client = await connect('redis://127.0.0.1:6379/0', { connectTimeout: 2000 })
 * // OpenTelemetry metrics on the global MeterProvider (npm install @opentelemetry/api):
 * const measured = await connect('redis://127.0.0.1:6379/0', { metrics: true })
 * ```
 */
export function connect(url: string, options?: ConnectOptions): Promise<Client> {
  return Client._connect(url, options)
}
