/**
 * @internal The native half of a lock of the RLock family: its number in the native client's lock
 * table, with its name and kind.
 *
 * A lock is not a Node-API object of its own: a wrapped native object costs ~0.5 KB (the wrap's
 * reference and weak handle), more than the lock itself, and a process may make tens of
 * thousands. The client's factories return a number instead, this object calls the client's
 * `lock*` methods with it, and the client drops the entry when this object is collected
 * (`Client._nativeLock`, a `FinalizationRegistry`).
 *
 * @module
 */
import type native = require('../native')

/** @internal */
export class NativeLock {
  constructor(
    /** The native client whose table holds the lock. */
    readonly client: native.Client,
    /** The lock's number in that table. */
    readonly id: number,
    /** The lock's name: its key in Redis. */
    readonly name: string,
    /** `'lock'`, `'fair_lock'`, `'spin_lock'`, `'fenced_lock'`, `'non_reentrant_lock'`, `'read_lock'` or `'write_lock'`. */
    readonly kind: string,
  ) {}

  acquire(owner: number, wait: number | undefined | null, lease: number | undefined | null, cancel: native.CancelToken | undefined | null, failOnTimeout: boolean): Promise<bigint | null> {
    return this.client.lockAcquire(this.id, owner, wait, lease, cancel, failOnTimeout)
  }

  release(owner: number): Promise<boolean> {
    return this.client.lockRelease(this.id, owner)
  }

  forceUnlock(): Promise<boolean> {
    return this.client.lockForceUnlock(this.id)
  }

  isLocked(): Promise<boolean> {
    return this.client.lockIsLocked(this.id)
  }

  isHeldBy(owner: number): Promise<boolean> {
    return this.client.lockIsHeldBy(this.id, owner)
  }

  holdCountOf(owner: number): Promise<number> {
    return this.client.lockHoldCountOf(this.id, owner)
  }

  remainingLease(): Promise<number | null> {
    return this.client.lockRemainingLease(this.id)
  }

  holders(): Promise<Array<string>> {
    return this.client.lockHolders(this.id)
  }

  isLost(owner: number): boolean {
    return this.client.lockIsLost(this.id, owner)
  }
}
