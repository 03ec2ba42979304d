/**
 * Argument checks shared by every object's host class: options objects (an unknown key is
 * refused, with the key it most likely meant), acquire options (`wait`, `lease`, `signal`,
 * `owner`) and counts of permits. Each throws the message tests-js/input tests pin, before
 * anything is sent; core checks the ranges again. A leaf: it imports only the errors, the owner
 * check and core's table of limits.
 *
 * @module
 */
import { invalidArgument } from './errors'
import { checkOwner } from './identity'
import { checkWhole } from './limits'

/** @internal Checked acquire options. */
export interface Checked {
  wait: number | null
  lease: number | null
  signal: AbortSignal | undefined
  owner: number | undefined
}

/** Options people bring from other libraries, and what crosslock calls them. */
const SPELLED_HERE: Readonly<Record<string, string>> = {
  timeout: 'wait',
  waitTime: 'wait',
  waitTimeout: 'wait',
  acquireTimeout: 'wait',
  ttl: 'lease',
  leaseTime: 'lease',
  lockTimeout: 'lease',
  expire: 'lease',
  duration: 'lease',
  abortSignal: 'signal',
  count: 'permits',
  permit: 'permits',
}

/** @internal The keys of {@link AcquireOptions}. */
export const ACQUIRE_KEYS = ['wait', 'lease', 'signal', 'owner'] as const

/**
 * @internal An options object (`{}` for none), refusing a key it does not take: a misspelled
 * option (`{ timeout: 5000 }` for `{ wait: 5000 }`) would otherwise be ignored without a word,
 * and an acquire meant to give up after 5 s would wait forever. A key whose value is `undefined`
 * says nothing and passes. `what` names the object for the message (`lock 'orders:42'`).
 */
export function optionsObject(options: unknown, what: string, allowed: readonly string[], name?: string): Record<string, unknown> {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') {
    const permits = typeof options === 'number' && allowed.includes('permits') ? ` (for ${options} permits, pass { permits: ${options} })` : ''
    throw invalidArgument('type', `the options of ${what} must be an object, got ${typeof options}${permits}`, name)
  }
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (o[key] === undefined || allowed.includes(key)) continue
    const spelled = SPELLED_HERE[key]
    const meant = spelled !== undefined && allowed.includes(spelled) ? spelled : nearest(key, allowed)
    const hint = meant !== undefined ? `; did you mean '${meant}'?` : ''
    const known = allowed.map((k) => `'${k}'`).join(', ')
    throw invalidArgument('type', `unknown option '${key}' for ${what}${hint} (it takes ${known})`, name)
  }
  return o
}

/**
 * The allowed key a misspelled one most likely meant: the same letters in another case, or the
 * closest within one edit per three letters (at most two, and two only for a key with the same
 * first letter; an edit is a letter added, dropped, changed, or two neighbours swapped), so
 * `connectTimout` finds `connectTimeout` and `ownr` finds `owner` while an unrelated key
 * (`retries` beside `metrics`) finds nothing.
 */
function nearest(key: string, allowed: readonly string[]): string | undefined {
  const lower = key.toLowerCase()
  const sameLetters = allowed.find((k) => k.toLowerCase() === lower)
  if (sameLetters !== undefined) return sameLetters
  const limit = Math.max(1, Math.min(2, Math.floor(key.length / 3)))
  let best: string | undefined
  let bestDistance = limit + 1
  for (const k of allowed) {
    const d = editDistance(lower, k.toLowerCase())
    // Two edits away only with the same first letter: 'retries' is not a typo of 'metrics'.
    if (d >= 2 && k[0]!.toLowerCase() !== lower[0]) continue
    if (d < bestDistance) {
      best = k
      bestDistance = d
    }
  }
  return best
}

/** Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  // Three rows of the usual table: the one before last, the last, and the one being filled.
  let before: number[] = []
  let last = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let d = Math.min(last[j] + 1, row[j - 1] + 1, last[j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2] + 1)
      row.push(d)
    }
    before = last
    last = row
  }
  return last[b.length]
}

/**
 * @internal Checks acquire options (`wait`, `lease`, `signal`, `owner`, or the subset `allowed`
 * names), for the object `what` names (`lock 'orders:42'`) whose key is `name`.
 */
export function checkAcquire(
  options: unknown,
  what: string,
  name: string | undefined,
  defaultWait: number | null,
  allowed: readonly string[] = ACQUIRE_KEYS,
): Checked {
  const o = optionsObject(options, what, allowed, name)
  let wait = defaultWait
  if (o.wait !== undefined && o.wait !== null) {
    if (typeof o.wait !== 'number') {
      throw invalidArgument('type', `wait must be a number of milliseconds, got ${typeof o.wait} (${what})`, name)
    }
    if (Number.isNaN(o.wait) || o.wait < 0) {
      throw invalidArgument(
        'range',
        `wait must be ≥ 0 ms (0 tries once; leave it out to wait as long as it takes), got ${o.wait} (${what})`,
        name,
      )
    }
    wait = o.wait === Infinity ? null : o.wait
  }
  let lease: number | null = null
  if (o.lease !== undefined && o.lease !== null) {
    if (typeof o.lease !== 'number') {
      throw invalidArgument('type', `lease must be a number of milliseconds, got ${typeof o.lease} (${what})`, name)
    }
    if (!Number.isFinite(o.lease) || o.lease < 1) {
      throw invalidArgument(
        'range',
        `lease must be a finite number of milliseconds ≥ 1 (leave it out for watchdog renewal), got ${o.lease} (${what})`,
        name,
      )
    }
    lease = o.lease
  }
  let signal: AbortSignal | undefined
  if (o.signal !== undefined && o.signal !== null) {
    const s = o.signal as AbortSignal
    if (typeof s !== 'object' || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function') {
      throw invalidArgument('type', `signal must be an AbortSignal (${what})`, name)
    }
    signal = s
  }
  const owner = o.owner === undefined || o.owner === null ? undefined : checkOwner(o.owner, name)
  return { wait, lease, signal, owner }
}

/**
 * @internal Permits to take or give back; left out they are 1 (`undefined`, or `null` in an
 * options object: `fromOptions`, as every option), and `null` for an argument is refused.
 */
export function checkPermits(value: unknown, name: string, low: 0 | 1 = 1, fromOptions = false): number {
  if (value === undefined || (fromOptions && value === null)) return 1
  return checkWhole(value, low === 0 ? 'permits_set' : 'permits', `permits of '${name}'`, name)
}
