/**
 * {@link ReadWriteLock}: Redisson's `RReadWriteLock`, with its {@link ReadLock} and
 * {@link WriteLock}.
 *
 * @module
 */
import { Lockable } from './lockable'

/**
 * The read half of a {@link ReadWriteLock}: many holders at once, none while a writer holds the
 * write lock (except that writer itself: a downgrade). Each read hold keeps its own timeout key
 * in Redis, renewed by the watchdog, as Redisson's readers do. A read release wakes one waiter.
 *
 * @example
 * ```js
 * await rw.readLock().withLock(async () => work()) // many readers at once
 * ```
 */
export class ReadLock extends Lockable {}

/**
 * The write half of a {@link ReadWriteLock}: one holder (re-entrant), no reader but the writer
 * itself. A holder of the read lock asking for it is refused at once with `UpgradeRefusedError`;
 * a write release wakes every waiter. Its holder strings end in `:write`.
 *
 * @example
 * ```js
 * await rw.writeLock().withLock(async () => work()) // alone
 * ```
 */
export class WriteLock extends Lockable {}

/**
 * Many readers or one writer, stored exactly as Redisson's `RReadWriteLock`: one hash at the name
 * (`mode` → `read`/`write`, each reader `<client-id>:<owner>` → hold count, the writer
 * `<client-id>:<owner>:write`), waiters of both kinds on `redisson_rwlock:{name}`.
 *
 * The writer may also take the read lock (a downgrade) and release the write lock first; readers
 * waiting elsewhere come in then. A holder of the read lock asking for the write lock (an
 * upgrade) is refused at once with `UpgradeRefusedError`, never left hanging. Never give a
 * read-write lock the name of another kind of lock: the layouts differ, and crosslock refuses
 * the mix with `WrongTypeError`.
 *
 * @example
 * ```js
 * const rw = client.readWriteLock('catalog')
 * await rw.readLock().withLock(async () => work()) // many readers
 * await rw.writeLock().withLock(async () => {
 *   await rw.readLock().withLock(async () => work()) // the writer may also read
 * })
 * ```
 */
export class ReadWriteLock {
  /** The lock's name: its key in Redis. */
  readonly name: string
  readonly #read: ReadLock
  readonly #write: WriteLock

  /** @internal Made by `client.readWriteLock(name)`. */
  constructor(read: ReadLock, write: WriteLock) {
    this.name = read.name
    this.#read = read
    this.#write = write
  }

  /**
   * The read lock (the same object every call).
   *
   * @example
   * ```js
   * const held = await rw.readLock().acquire()
   * await held.release()
   * ```
   */
  readLock(): ReadLock {
    return this.#read
  }

  /**
   * The write lock (the same object every call).
   *
   * @example
   * ```js
   * const held = await rw.writeLock().acquire({ wait: 1000 })
   * await held.release()
   * ```
   */
  writeLock(): WriteLock {
    return this.#write
  }
}
