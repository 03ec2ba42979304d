/**
 * Core's table of argument limits (`crosslock::limits` in Rust, `_native.LIMITS` in Python): the
 * range of every whole-number argument, spelled once, so a count refused in one language is
 * refused in every one, before anything is sent.
 *
 * @internal
 * @module
 */

import native = require('../native')
import { invalidArgument } from './errors'

/** One limit: its inclusive bounds and how a message shows them (`1..2^32-1`). */
export interface Limit { readonly min: number, readonly max: number, readonly shown: string }

/** The names core gives its limits. */
export type LimitName = 'permits' | 'permits_set' | 'permit_delta' | 'latch_count' | 'db' | 'watchdog_batch' | 'replicas' | 'scan_limit' | 'lease_ms' | 'duration_ms'

const TABLE: ReadonlyMap<string, Limit> = new Map(native.limits().map((l) => [l.name, Object.freeze({ min: l.min, max: l.max, shown: l.shown })]))

/** The limit core calls `name`. */
export function limit(name: LimitName): Limit {
  const l = TABLE.get(name)
  if (l === undefined) throw new Error(`crosslock: the native module has no limit '${name}' (a build of another version?)`)
  return l
}

/**
 * `value` when it is a whole number within the limit `name`; otherwise an `InvalidArgumentError`
 * (a `TypeError` for what is no number at all — `null`, `undefined`, a string, a bigint —, a
 * `RangeError` for a number out of range or not whole) naming `what`.
 */
export function checkWhole(value: unknown, name: LimitName, what: string, lockName?: string): number {
  const l = limit(name)
  if (typeof value !== 'number') {
    const got = value === null ? 'null' : typeof value
    throw invalidArgument('type', `${what} must be a whole number in ${l.shown}, got ${got}`, lockName)
  }
  if (!Number.isInteger(value) || value < l.min || value > l.max) {
    throw invalidArgument('range', `${what} must be a whole number in ${l.shown}, got ${value}`, lockName)
  }
  return value
}
