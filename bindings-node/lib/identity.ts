/**
 * Who holds a lock: the owner number `<n>` of the holder string `<client-id>:<n>` that Redis
 * stores (Redisson's thread id).
 *
 * JavaScript has no thread to name a holder by, and Node-API cannot read the current async
 * context, so crosslock decides it here, with one rule:
 *
 * - **Inside an owner scope** — the callback of `lock.withLock(fn)`, or of {@link runAsOwner} —
 *   every acquire, release and query acts as the scope's owner, across every `await` of that
 *   async call chain (an `AsyncLocalStorage`). A nested acquire of a lock the scope holds
 *   re-enters it (the hold count goes up) instead of waiting for itself.
 * - **Outside any scope** each `acquire()` is a holder of its own (a fresh owner number), so
 *   concurrent tasks always exclude each other, even when they were started in the same tick
 *   (`Promise.all([task(), task()])`) on the same `Lock` object. Such a hold is released with
 *   `held.release()`, which always uses the owner it was acquired with. `lock.release()` has no
 *   owner to act as there, so without an `owner` option it rejects with `NotHeldError`, and
 *   `lock.isHeld()` / `lock.holdCount()` answer `false` / `0`: they never act on, or answer for,
 *   another task's hold.
 * - **An explicit `owner` option** (a number from {@link newOwner}) overrides both, to hand a lock
 *   over between tasks or to re-enter without a scope.
 *
 * Why not pick the owner up automatically on the first `acquire()` of a task? Because two sibling
 * tasks started in the same synchronous tick cannot be told apart at that moment, and storing an
 * owner into the current context from inside `acquire()` (`enterWith`) would leak it into the
 * sibling and break exclusion. A scope makes the boundary explicit.
 *
 * Inside one scope, concurrent sub-tasks share its owner (they re-enter rather than exclude each
 * other); give each its own scope with `runAsOwner(fn)` when they must exclude each other.
 *
 * Owner numbers are unique within the process (every worker thread included). Each client has its
 * own id, so holders never collide across clients, workers or processes.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks'

import native = require('../native')
import { invalidArgument, viaNative } from './errors'

const scope = new AsyncLocalStorage<number>()

/**
 * A fresh owner number, never handed out before in this process: use it as the explicit `owner`
 * option to hand a lock from one task to another.
 *
 * @example
 * ```js
 * const { newOwner } = require('crosslock')
 * const owner = newOwner()
 * await lock.acquire({ owner })
 * setImmediate(async () => { await lock.release({ owner }) })   // another task releases it
 * ```
 */
export function newOwner(): number {
  return viaNative(() => native.nextOwner())
}

/**
 * The owner of the enclosing owner scope ({@link runAsOwner}, `lock.withLock`), or `undefined`
 * outside any scope.
 *
 * @example
 * ```js
 * await lock.withLock(async (held) => {
 *   console.log(currentOwner() === held.owner) // true
 * })
 * console.log(currentOwner()) // undefined
 * ```
 */
export function currentOwner(): number | undefined {
  return scope.getStore()
}

/**
 * Runs `fn` as one holder: every crosslock call in its async call chain acts as `owner` (a fresh
 * one by default), so it re-enters the locks it holds and excludes every other task. Returns what
 * `fn` returns (a promise if `fn` is async).
 *
 * @param fn - the task
 * @param owner - the owner number to act as; defaults to {@link newOwner}()
 *
 * @example
 * ```js
 * const { runAsOwner } = require('crosslock')
 * await runAsOwner(async () => {
 *   const outer = await lock.acquire()
 *   const inner = await lock.acquire()        // re-enters: same owner
 *   await inner.release()
 *   await outer.release()
 * })
 * ```
 */
export function runAsOwner<T>(fn: () => T, owner?: number): T {
  if (typeof fn !== 'function') throw invalidArgument('type', `runAsOwner(fn): fn must be a function, got ${typeof fn}`)
  const n = owner === undefined ? newOwner() : checkOwner(owner)
  return scope.run(n, fn)
}

/**
 * Validates an owner number. @internal
 */
export function checkOwner(value: unknown, lockName?: string): number {
  const of = lockName === undefined ? '' : ` (lock '${lockName}')`
  if (typeof value !== 'number') {
    throw invalidArgument('type', `owner must be a number (from newOwner()), got ${typeof value}${of}`, lockName)
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw invalidArgument('range', `owner must be a non-negative safe integer (from newOwner()), got ${value}${of}`, lockName)
  }
  return value
}

/**
 * The owner an acquire acts as: the explicit one, else the scope's, else a fresh one. @internal
 */
export function acquiringOwner(explicit: number | undefined): number {
  return explicit ?? scope.getStore() ?? newOwner()
}

/** Runs `fn` in the scope of `owner` (no validation). @internal */
export function inScope<T>(owner: number, fn: () => T): T {
  return scope.run(owner, fn)
}
