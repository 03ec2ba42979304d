/**
 * The errors crosslock throws, and the one function that turns a native error into them.
 *
 * Every error is a {@link CrosslockError} with a stable {@link CrosslockError.code | code},
 * the {@link CrosslockError.lockName | lockName} and {@link CrosslockError.holder | holder} it
 * concerns, and the Redis error as `cause` when there is one. Branch on the class or on `code`,
 * never on the message text.
 *
 * Invalid arguments detected in this TypeScript layer are thrown as real `TypeError`s (wrong
 * type, empty name) or `RangeError`s (negative or NaN durations) that carry the crosslock brand:
 * `instanceof InvalidArgumentError` and `instanceof CrosslockError` recognise them through
 * `static [Symbol.hasInstance]`, which checks the `code` brand rather than the prototype chain.
 *
 * @module
 */
import native = require('../native')

/**
 * The stable codes of {@link CrosslockError.code}.
 *
 * @example
 * ```js
 * try { await lock.acquire({ wait: 100 }) } catch (e) {
 *   if (e.code === 'TIMEOUT') console.log('busy')
 *   else throw e
 * }
 * ```
 */
export type ErrorCode = (typeof ERROR_CODES)[number]

/**
 * Every code, in the order of core's `ErrorKind::ALL` (the one table the codes come from).
 *
 * @example
 * ```js
 * const { ERROR_CODES } = require('crosslock')
 * console.log(ERROR_CODES.includes('AUTH')) // true
 * ```
 */
export const ERROR_CODES = [
  'NOT_HELD',
  'TIMEOUT',
  'LOCK_LOST',
  'UNAVAILABLE',
  'WRONG_TYPE',
  'INVALID_ARGUMENT',
  'CANCELLED',
  'AUTH',
  'NON_REENTRANT',
  'UPGRADE_REFUSED',
  'REDIS',
] as const

/**
 * What a {@link CrosslockError} concerns, besides its message.
 *
 * @example
 * ```js
 * const e = new NotHeldError("lock 'jobs' is not held", { lockName: 'jobs', holder: `${client.id}:7` })
 * ```
 */
export interface CrosslockErrorOptions {
  /** The lock concerned. */
  lockName?: string | undefined
  /** The holder string (`<client-id>:<owner>`) of the caller concerned. */
  holder?: string | undefined
  /** The underlying error (for instance Redis's). */
  cause?: unknown
  /** How long the caller waited before giving up, in milliseconds. */
  waited?: number | undefined
}

/** The brand every crosslock error carries: its code. A registered symbol, so copies of this module agree. */
const BRAND: unique symbol = Symbol.for('crosslock.errorCode') as never

interface Branded {
  [BRAND]?: ErrorCode
}

/** The code each class stands for (the base class stands for all of them). */
const CODE_OF = new Map<Function, ErrorCode>()

const ordinaryHasInstance = Function.prototype[Symbol.hasInstance]

function hasInstance(cls: Function, value: unknown): boolean {
  const code = typeof value === 'object' && value !== null ? (value as Branded)[BRAND] : undefined
  if (typeof code === 'string') {
    if (cls === CrosslockError) return true
    const want = CODE_OF.get(cls)
    if (want !== undefined) return code === want
  }
  return ordinaryHasInstance.call(cls, value)
}

function describe(target: Error & Branded, code: ErrorCode, options: CrosslockErrorOptions): void {
  Object.defineProperty(target, BRAND, { value: code, enumerable: false })
  const t = target as unknown as Record<string, unknown>
  t.code = code
  t.lockName = options.lockName ?? undefined
  t.holder = options.holder ?? undefined
  t.waited = options.waited ?? undefined
}

/**
 * The base of every crosslock error.
 *
 * @example
 * ```js
 * const { CrosslockError } = require('crosslock')
 * try {
 *   await held.release()
 * } catch (e) {
 *   if (e instanceof CrosslockError) console.error(e.code, e.lockName, e.holder, e.message)
 *   else throw e
 * }
 * ```
 */
export class CrosslockError extends Error {
  /** The stable code of this kind of error, e.g. `'TIMEOUT'`. */
  declare readonly code: ErrorCode
  /** The lock this error concerns, when it concerns one. */
  declare readonly lockName: string | undefined
  /** The holder string (`<client-id>:<owner>`) of the caller concerned, when known. */
  declare readonly holder: string | undefined
  /** How long the caller waited before giving up (ms), for `TIMEOUT`. */
  declare readonly waited: number | undefined

  /**
   * @param code - the kind, one of {@link ErrorCode}
   * @param message - what happened, which lock, which holder, what to do
   * @param options - lock name, holder, cause, waited
   */
  constructor(code: ErrorCode, message: string, options: CrosslockErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    describe(this, code, options)
  }

  /** Recognises crosslock errors by their brand, including the `TypeError`/`RangeError` ones. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return hasInstance(this, value)
  }
}

/**
 * Releasing as an owner that does not hold the lock (or a `HeldLock` already released), or
 * calling `lock.release()` outside an owner scope without an `owner` option. Redis was not
 * changed.
 *
 * @example
 * ```js
 * try { await lock.release({ owner }) } catch (e) { if (e instanceof NotHeldError) console.warn(e.message) }
 * ```
 */
export class NotHeldError extends CrosslockError {
  /** @param message - what happened @param options - lock name, holder, cause */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('NOT_HELD', message, options)
  }
}

/**
 * The wait limit (`wait`, ms) passed before the lock could be acquired.
 *
 * @example
 * ```js
 * try {
 *   const held = await lock.acquire({ wait: 500 })
 *   await held.release()
 * } catch (e) {
 *   if (e instanceof LockTimeoutError) console.log(`busy after ${e.waited} ms: ${e.message}`)
 *   else throw e
 * }
 * ```
 */
export class LockTimeoutError extends CrosslockError {
  /** @param message - what happened @param options - lock name, holder, waited */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('TIMEOUT', message, options)
  }
}

/**
 * The lock was held, but it is gone: it expired or was force-unlocked, so work done since may
 * have overlapped another holder. It is the reason of `HeldLock.signal` and what `release()`
 * rejects with after such a loss.
 *
 * @example
 * ```js
 * const held = await lock.acquire()
 * held.signal.addEventListener('abort', () => console.error(held.signal.reason.message))
 * try { await work(held.signal) } finally {
 *   await held.release().catch((e) => { if (!(e instanceof LockLostError)) throw e })
 * }
 * ```
 */
export class LockLostError extends CrosslockError {
  /** @param message - what happened @param options - lock name, holder */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('LOCK_LOST', message, options)
  }
}

/**
 * Redis could not be reached, dropped the connection or did not answer in time; also any use of
 * a closed client.
 *
 * @example
 * ```js
 * try { await connect('redis://127.0.0.1:1/0', { connectTimeout: 500 }) }
 * catch (e) { if (e instanceof RedisUnavailableError) console.error(e.message) }
 * ```
 */
export class RedisUnavailableError extends CrosslockError {
  /** @param message - what happened @param options - lock name, cause */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('UNAVAILABLE', message, options)
  }
}

/**
 * The lock's key holds another type of value (a name collision). Nothing was modified.
 *
 * @example
 * ```js
 * try { await client.lock('some:string:key').acquire() }
 * catch (e) { if (e instanceof WrongTypeError) console.error(`pick another name than ${e.lockName}`) }
 * ```
 */
export class WrongTypeError extends CrosslockError {
  /** @param message - what happened @param options - lock name, cause */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('WRONG_TYPE', message, options)
  }
}

/**
 * An argument was malformed or out of range: an empty or non-string name, a negative or NaN
 * duration, a bad URL. When this TypeScript layer detects it, the error thrown is also a
 * `TypeError` (wrong type, empty name) or a `RangeError` (value out of range); `instanceof
 * InvalidArgumentError` is true for all of them.
 *
 * @example
 * ```js
 * try { client.lock('') } catch (e) {
 *   console.log(e instanceof InvalidArgumentError, e instanceof TypeError, e.code) // true true 'INVALID_ARGUMENT'
 * }
 * ```
 */
export class InvalidArgumentError extends CrosslockError {
  /** @param message - what happened @param options - lock name */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('INVALID_ARGUMENT', message, options)
  }
}

/**
 * Redis refused the credentials (a wrong password or user in the URL, or none where the server
 * needs one). Retrying does not help, so it is deliberately not a `RedisUnavailableError`.
 *
 * @example
 * ```js
 * try { await connect('redis://default:wrong@127.0.0.1:6379/0') }
 * catch (e) { if (e instanceof AuthenticationError) console.error('fix the Redis password:', e.message) }
 * ```
 */
export class AuthenticationError extends CrosslockError {
  /** @param message - what happened @param options - cause */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('AUTH', message, options)
  }
}

/**
 * The owner already holds a `NonReentrantLock` and asked for it again: that would wait for
 * itself forever. Nothing changed in Redis.
 *
 * @example
 * ```js
 * await lock.withLock(async () => {
 *   await lock.acquire().catch((e) => console.log(e instanceof NonReentrantError)) // true
 * })
 * ```
 */
export class NonReentrantError extends CrosslockError {
  /** @param message - what happened @param options - lock name, holder */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('NON_REENTRANT', message, options)
  }
}

/**
 * The owner holds the read lock of a `ReadWriteLock` and asked for its write lock: an upgrade
 * would wait for itself forever, so it is refused at once. Release the read lock first.
 *
 * @example
 * ```js
 * await rw.readLock().withLock(async () => {
 *   await rw.writeLock().acquire().catch((e) => console.log(e.code)) // 'UPGRADE_REFUSED'
 * })
 * ```
 */
export class UpgradeRefusedError extends CrosslockError {
  /** @param message - what happened @param options - lock name, holder */
  constructor(message: string, options: CrosslockErrorOptions = {}) {
    super('UPGRADE_REFUSED', message, options)
  }
}

type ErrorClass = new (message: string, options?: CrosslockErrorOptions) => CrosslockError

/** The one table of subclasses: each code's class (codes without one use the base class). */
const CLASSES: ReadonlyArray<readonly [ErrorClass, ErrorCode]> = [
  [NotHeldError, 'NOT_HELD'],
  [LockTimeoutError, 'TIMEOUT'],
  [LockLostError, 'LOCK_LOST'],
  [RedisUnavailableError, 'UNAVAILABLE'],
  [WrongTypeError, 'WRONG_TYPE'],
  [InvalidArgumentError, 'INVALID_ARGUMENT'],
  [AuthenticationError, 'AUTH'],
  [NonReentrantError, 'NON_REENTRANT'],
  [UpgradeRefusedError, 'UPGRADE_REFUSED'],
]

const CLASS_OF = new Map<ErrorCode, ErrorClass>()
for (const [cls, code] of CLASSES) {
  CODE_OF.set(cls, code)
  CLASS_OF.set(code, cls)
}
for (const cls of [CrosslockError, ...CLASSES.map(([c]) => c)]) {
  Object.defineProperty(cls.prototype, 'name', { value: cls.name, writable: true, configurable: true })
}

/** Makes the error of `code`: its subclass, or the base class for `CANCELLED` and `REDIS`. */
export function makeError(code: ErrorCode, message: string, options: CrosslockErrorOptions = {}): CrosslockError {
  const cls = CLASS_OF.get(code)
  return cls ? new cls(message, options) : new CrosslockError(code, message, options)
}

/**
 * An invalid-argument error that is also the host's own class: a `TypeError` for a value of the
 * wrong type (or an empty name), a `RangeError` for a value out of range. Typed as
 * {@link InvalidArgumentError}, which `instanceof` confirms.
 * @internal
 */
export function invalidArgument(kind: 'type' | 'range', message: string, lockName?: string): InvalidArgumentError {
  const error = kind === 'type' ? new TypeError(message) : new RangeError(message)
  Object.defineProperty(error, 'name', { value: 'InvalidArgumentError', writable: true, configurable: true })
  describe(error, 'INVALID_ARGUMENT', { lockName })
  return error as unknown as InvalidArgumentError
}

/** The Redis error behind a crosslock error, as its `cause`. */
class RedisCause extends Error {}
Object.defineProperty(RedisCause.prototype, 'name', { value: 'RedisError' })

interface Encoded {
  code: ErrorCode
  message: string
  lockName: string | null
  holder: string | null
  cause: string | null
  waited: number | null
}

/**
 * Decodes an error thrown by the native module (see `bindings-node/src/error.rs`: its message is
 * `CROSSLOCK_ERROR:` followed by JSON) into its {@link CrosslockError} subclass. Anything else is
 * returned unchanged.
 * @internal
 */
export function fromNative(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.startsWith(native.ERROR_PREFIX)) return error
  let data: Encoded
  try {
    data = JSON.parse(error.message.slice(native.ERROR_PREFIX.length)) as Encoded
  } catch {
    return error
  }
  return makeError(data.code, data.message, {
    lockName: data.lockName ?? undefined,
    holder: data.holder ?? undefined,
    cause: data.cause === null ? undefined : new RedisCause(data.cause),
    waited: data.waited ?? undefined,
  })
}

/**
 * Runs a native call, turning whatever it throws or rejects with into a {@link CrosslockError}.
 * Every call into the native module goes through here.
 * @internal
 */
export function viaNative<T>(call: () => T): T {
  let result: T
  try {
    result = call()
  } catch (e) {
    throw fromNative(e)
  }
  if (result instanceof Promise) {
    return result.catch((e: unknown) => {
      throw fromNative(e)
    }) as T
  }
  return result
}

/** Whether `value` is a crosslock error with `code`. @internal */
export function hasCode(value: unknown, code: ErrorCode): boolean {
  return typeof value === 'object' && value !== null && (value as Branded)[BRAND] === code
}
