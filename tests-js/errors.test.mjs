// Every error kind against a real server: its class (and host class), code, lockName, holder and a
// message naming the lock; and every bad input.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { freePort, startRedis } from './helpers/redis-server.mjs'
import { RawRedis } from './helpers/resp.mjs'
import { crosslock, unique, useRedis, waitUntil } from './helpers/util.mjs'

const {
  CrosslockError,
  NotHeldError,
  LockTimeoutError,
  LockLostError,
  RedisUnavailableError,
  WrongTypeError,
  InvalidArgumentError,
  connect,
  runAsOwner
} = crosslock

const env = useRedis()

/** Asserts `promiseOrFn` fails with a crosslock error of `cls`/`code`, returns it. */
async function failsWith (promiseOrFn, cls, code) {
  let err
  try {
    await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn)
  } catch (e) {
    err = e
  }
  assert.ok(err, `expected a ${cls.name}`)
  assert.ok(err instanceof cls, `${err} should be a ${cls.name}`)
  assert.ok(err instanceof CrosslockError, `${err} should be a CrosslockError`)
  assert.ok(err instanceof Error)
  assert.equal(err.code, code)
  return err
}

describe('bad input', () => {
  const badNames = [['', 'empty'], [undefined, 'undefined'], [42, 'number'], [null, 'null'], [{}, 'object']]
  for (const [name, what] of badNames) {
    test(`client.lock(${what}) throws InvalidArgumentError that is a TypeError`, async () => {
      const err = await failsWith(() => env.client.lock(name), InvalidArgumentError, 'INVALID_ARGUMENT')
      assert.ok(err instanceof TypeError)
      assert.equal(err.name, 'InvalidArgumentError')
      assert.match(err.message, /non-empty string/)
    })
  }

  const rangeCases = [
    [{ wait: -1 }, /wait/], [{ wait: NaN }, /wait/], [{ lease: 0 }, /lease/], [{ lease: -5 }, /lease/],
    [{ lease: NaN }, /lease/], [{ lease: Infinity }, /lease/], [{ lease: 0.5 }, /lease/],
    [{ owner: -1 }, /owner/], [{ owner: 1.5 }, /owner/], [{ owner: 2 ** 53 }, /owner/]
  ]
  const typeCases = [
    [{ wait: '5' }, /wait/], [{ lease: '100' }, /lease/], [{ owner: '1' }, /owner/],
    [{ signal: {} }, /signal/], [{ signal: 'abort' }, /signal/], ['options', /options/], [7, /options/],
    // A key the options do not name is refused, not ignored: `timeout` (ours is `wait`) would
    // otherwise make a bounded acquire wait forever, or a bounded tryAcquire try once.
    [{ timeout: 5000 }, /unknown option 'timeout' for lock '.*'; did you mean 'wait'\? \(it takes 'wait', 'lease', 'signal', 'owner'\)/],
    // A slip of the keyboard gets the nearest option named; a key like no option gets none.
    [{ wait: 100, leese: 5000 }, /unknown option 'leese' for lock '[^']*'; did you mean 'lease'\? \(it takes/],
    [{ Wait: 100 }, /unknown option 'Wait' for lock '[^']*'; did you mean 'wait'\? \(it takes/],
    [{ priority: 1 }, /unknown option 'priority' for lock '[^']*' \(it takes/]
  ]
  for (const method of ['acquire', 'tryAcquire', 'withLock']) {
    for (const [options, pattern] of rangeCases) {
      test(`${method}(${JSON.stringify(options) ?? String(options)}) rejects with a RangeError InvalidArgumentError`, async () => {
        const lock = env.client.lock(unique('bad'))
        const call = method === 'withLock' ? () => lock.withLock(() => {}, options) : () => lock[method](options)
        const err = await failsWith(call, InvalidArgumentError, 'INVALID_ARGUMENT')
        assert.ok(err instanceof RangeError, `${err} should be a RangeError`)
        assert.match(err.message, pattern)
        assert.ok(err.message.includes(lock.name), err.message)
        assert.equal(err.lockName, lock.name)
        assert.equal(await lock.isLocked(), false)
      })
    }
    for (const [options, pattern] of typeCases) {
      test(`${method}(${JSON.stringify(options)}) rejects with a TypeError InvalidArgumentError`, async () => {
        const lock = env.client.lock(unique('bad'))
        const call = method === 'withLock' ? () => lock.withLock(() => {}, options) : () => lock[method](options)
        const err = await failsWith(call, InvalidArgumentError, 'INVALID_ARGUMENT')
        assert.ok(err instanceof TypeError, `${err} should be a TypeError`)
        assert.match(err.message, pattern)
        assert.equal(await lock.isLocked(), false)
      })
    }
  }

  test('an unknown option is refused by every object that takes options, and changes nothing', async () => {
    const unknown = async (call, pattern) => {
      const err = await failsWith(call, InvalidArgumentError, 'INVALID_ARGUMENT')
      assert.ok(err instanceof TypeError, `${err} should be a TypeError`)
      assert.match(err.message, pattern)
      return err
    }
    const lock = env.client.lock(unique('opts'))
    await unknown(() => lock.release({ ownr: 1 }), /unknown option 'ownr' for lock '.*'; did you mean 'owner'\? \(it takes 'owner'\)/)
    await unknown(() => lock.isHeld({ ownr: 1 }), /unknown option 'ownr'/)
    await unknown(() => lock.holdCount({ ownr: 1 }), /unknown option 'ownr'/)
    // A key whose value is undefined says nothing and passes (`{ ...defaults, timeout: cfg.timeout }`).
    const held = await lock.acquire({ wait: 1000, timeout: undefined })
    await held.release()

    const sem = env.client.semaphore(unique('opts-sem'))
    assert.equal(await sem.trySetPermits(2), true)
    const lease = await unknown(() => sem.acquire({ lease: 1000 }), /unknown option 'lease' for semaphore '.*' \(it takes 'permits', 'wait', 'signal'\)/)
    assert.equal(lease.lockName, sem.name)
    await unknown(() => sem.tryAcquire({ count: 2 }), /unknown option 'count' .*did you mean 'permits'\?/)
    await unknown(() => sem.withPermits(() => assert.fail('ran'), { timeout: 10 }), /did you mean 'wait'\?/)
    // Redisson's acquire(int permits), the habit a Java or Python user brings:
    await unknown(() => sem.acquire(2), /options of semaphore '.*' must be an object, got number \(for 2 permits, pass \{ permits: 2 \}\)/)
    assert.equal(await sem.availablePermits(), 2)

    const pes = env.client.permitExpirableSemaphore(unique('opts-pes'))
    assert.equal(await pes.trySetPermits(1), true)
    await unknown(() => pes.acquire({ permits: 2 }), /unknown option 'permits' for semaphore '.*' \(it takes 'wait', 'lease', 'signal'\)/)
    await unknown(() => pes.tryAcquire({ ttl: 1000 }), /did you mean 'lease'\?/)
    assert.equal(await pes.availablePermits(), 1)

    const latch = env.client.countDownLatch(unique('opts-latch'))
    await unknown(() => latch.wait({ timeout: 10 }), /unknown option 'timeout' for latch '.*'; did you mean 'wait'\? \(it takes 'wait', 'signal'\)/)

    const both = new crosslock.MultiLock([env.client.lock(unique('opts-a')), env.client.lock(unique('opts-b'))])
    await unknown(() => both.acquire({ acquireTimeout: 10 }), /unknown option 'acquireTimeout' for the multi-lock; did you mean 'wait'\?/)
    await unknown(() => both.withLock(() => assert.fail('ran'), { lockTimeout: 10 }), /did you mean 'lease'\?/)
    for (const part of both.locks) assert.equal(await part.isLocked(), false)

    await unknown(() => env.client.spinLock(unique('opts-spin'), { backof: {} }), /unknown option 'backof' for spin lock '.*'; did you mean 'backoff'\? \(it takes 'backoff'\)/)
    await unknown(
      () => env.client.spinLock(unique('opts-spin'), { backoff: { kind: 'constant', initial: 5, max: 50 } }),
      /unknown option 'max' for the constant backoff of spin lock '.*' \(it takes 'kind', 'initial'\)/
    )

    await unknown(() => connect(env.url, { timeout: 100 }), /unknown option 'timeout' for connect\(\) \(it takes 'connectTimeout', 'responseTimeout',/)
    await unknown(() => connect(env.url, { watchdogTimout: 100 }), /unknown option 'watchdogTimout' for connect\(\); did you mean 'watchdogTimeout'\?/)
  })

  test('withLock(non-function), runAsOwner(non-function), release/isHeld with a bad owner', async () => {
    const lock = env.client.lock(unique('bad'))
    assert.ok((await failsWith(lock.withLock('nope'), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof TypeError)
    assert.ok((await failsWith(() => runAsOwner(42), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof TypeError)
    assert.ok((await failsWith(() => runAsOwner(() => {}, -3), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof RangeError)
    assert.ok((await failsWith(lock.release({ owner: 'me' }), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof TypeError)
    assert.ok((await failsWith(lock.isHeld({ owner: -1 }), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof RangeError)
    assert.ok((await failsWith(lock.holdCount({ owner: NaN }), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof RangeError)
  })

  test('connect() with a bad url or options', async () => {
    for (const url of ['', 42, undefined]) {
      assert.ok((await failsWith(connect(url), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof TypeError)
    }
    for (const options of [{ connectTimeout: -1 }, { responseTimeout: 0 }, { watchdogTimeout: NaN }, { watchdogBatchSize: 0 }]) {
      assert.ok((await failsWith(connect(env.url, options), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof RangeError)
    }
    assert.ok((await failsWith(connect(env.url, { watchdogTimeout: '600' }), InvalidArgumentError, 'INVALID_ARGUMENT')) instanceof TypeError)
    // A misspelled option is refused with the one it most likely meant, not ignored.
    const typo = await failsWith(connect(env.url, { connectTimout: 500 }), InvalidArgumentError, 'INVALID_ARGUMENT')
    assert.ok(typo instanceof TypeError)
    assert.match(typo.message, /unknown option 'connectTimout' for connect\(\); did you mean 'connectTimeout'\? \(it takes 'connectTimeout', /)
    const swapped = await failsWith(connect(env.url, { resposneTimeout: 500 }), InvalidArgumentError, 'INVALID_ARGUMENT')
    assert.match(swapped.message, /did you mean 'responseTimeout'\?/)
    const unrelated = await failsWith(connect(env.url, { retries: 3 }), InvalidArgumentError, 'INVALID_ARGUMENT')
    assert.doesNotMatch(unrelated.message, /did you mean/)
    // Checked by core: a URL that is not Redis's, a watchdog below its 30 ms floor.
    const notRedis = await failsWith(connect('http://127.0.0.1:1/'), InvalidArgumentError, 'INVALID_ARGUMENT')
    assert.ok(notRedis.message.length > 0)
    await failsWith(connect(env.url, { watchdogTimeout: 10 }), InvalidArgumentError, 'INVALID_ARGUMENT')
  })
})

describe('error kinds against a real server', () => {
  test('release by a non-holder: NotHeldError naming lock and caller; Redis unchanged', async () => {
    const name = unique('notheld')
    const held = await env.client.lock(name).acquire()
    const before = await env.raw.hgetall(name)
    const other = await env.connect()
    const err = await failsWith(runAsOwner(() => other.lock(name).release()), NotHeldError, 'NOT_HELD')
    assert.ok(err instanceof NotHeldError)
    assert.equal(err.lockName, name)
    assert.ok(err.holder.startsWith(`${other.id}:`), err.holder)
    assert.ok(err.message.includes(name) && err.message.includes(err.holder), err.message)
    assert.ok(err.message.includes(held.holder), 'names the current holder')
    // Another owner of the same client, explicitly.
    const err2 = await failsWith(env.client.lock(name).release({ owner: crosslock.newOwner() }), NotHeldError, 'NOT_HELD')
    assert.ok(err2.holder.startsWith(`${env.client.id}:`))
    // No owner at all (outside a scope, no { owner }): refused before Redis, with what to do.
    const err3 = await failsWith(env.client.lock(name).release(), NotHeldError, 'NOT_HELD')
    assert.equal(err3.lockName, name)
    assert.ok(err3.message.includes(name) && err3.message.includes('held.release()'), err3.message)
    assert.deepEqual(await env.raw.hgetall(name), before)
    const pttl = await env.raw.command('PTTL', name)
    assert.ok(pttl > 25_000, `TTL untouched: ${pttl}`)
    await held.release()
  })

  test('a name colliding with a non-hash key: WrongTypeError, key untouched', async () => {
    const name = unique('wrongtype')
    await env.raw.command('SET', name, 'precious')
    const lock = env.client.lock(name)
    const err = await failsWith(lock.acquire(), WrongTypeError, 'WRONG_TYPE')
    assert.equal(err.lockName, name)
    assert.ok(err.message.includes(name), err.message)
    await failsWith(lock.tryAcquire(), WrongTypeError, 'WRONG_TYPE')
    await failsWith(lock.forceUnlock(), WrongTypeError, 'WRONG_TYPE')
    assert.equal(await env.raw.command('GET', name), 'precious')
    assert.equal(await env.raw.command('TTL', name), -1)
  })

  test('a passed wait limit: LockTimeoutError with lockName, holder and waited', async () => {
    const name = unique('timeout')
    const held = await env.client.lock(name).acquire()
    const err = await failsWith(env.client.lock(name).acquire({ wait: 50 }), LockTimeoutError, 'TIMEOUT')
    assert.equal(err.lockName, name)
    assert.ok(err.holder.startsWith(`${env.client.id}:`))
    assert.ok(err.waited >= 49 && err.waited <= 51)
    assert.ok(err.message.includes(name))
    await held.release()
  })

  test('Redis unreachable: RedisUnavailableError naming the address, within the connect timeout', async () => {
    const port = await freePort()
    const started = Date.now()
    const err = await failsWith(connect(`redis://127.0.0.1:${port}/0`, { connectTimeout: 1000 }), RedisUnavailableError, 'UNAVAILABLE')
    assert.ok(Date.now() - started < 5000, 'no hang')
    assert.ok(err.message.includes(`127.0.0.1:${port}`), err.message)
  })

  test('a connect refused on its second connection leaves no connection open', async () => {
    // Room for exactly one more client: of a client's two connections (commands, pub/sub) one
    // gets in and the other is refused. The connect fails, and the one that got in is closed.
    const server = await startRedis()
    const raw = await RawRedis.connect(server.url)
    try {
      const clients = async () => String(await raw.command('CLIENT', 'LIST')).split('\n').filter(Boolean).length
      for (let attempt = 0; attempt < 3; attempt++) { // which of the two gets the free slot is a race
        const before = await clients()
        await raw.command('CONFIG', 'SET', 'maxclients', String(before + 1))
        const err = await failsWith(connect(server.url, { connectTimeout: 2000 }), RedisUnavailableError, 'UNAVAILABLE')
        assert.ok(err.message.includes('maxclients'), err.message)
        await waitUntil(async () => (await clients()) <= before, 'the failed connect to leave nothing open', 5000)
        await raw.command('CONFIG', 'SET', 'maxclients', '10000')
      }
    } finally {
      await raw.close()
      await server.stop()
    }
  })

  test('a closed client: RedisUnavailableError', async () => {
    const client = await crosslock.connect(env.url)
    const lock = client.lock(unique('closed'))
    await client.close()
    await client.close()
    await failsWith(lock.acquire(), RedisUnavailableError, 'UNAVAILABLE')
    await failsWith(lock.isLocked(), RedisUnavailableError, 'UNAVAILABLE')
  })

  test('a lost lock: LockLostError from release()', async () => {
    const lock = env.client.lock(unique('lost'))
    const held = await lock.acquire({ lease: 60_000 })
    await env.raw.command('DEL', lock.name)
    const err = await failsWith(held.release(), LockLostError, 'LOCK_LOST')
    assert.equal(err.lockName, lock.name)
    assert.equal(err.holder, held.holder)
    assert.ok(err.message.includes(lock.name))
    assert.equal(held.signal.reason, err)
  })
})

describe('the classes', () => {
  test('instanceof follows the code; names and fields are set', () => {
    const cases = [
      [NotHeldError, 'NOT_HELD'], [LockTimeoutError, 'TIMEOUT'], [LockLostError, 'LOCK_LOST'],
      [RedisUnavailableError, 'UNAVAILABLE'], [WrongTypeError, 'WRONG_TYPE'], [InvalidArgumentError, 'INVALID_ARGUMENT']
    ]
    for (const [cls, code] of cases) {
      const cause = new Error('inner')
      const e = new cls('message', { lockName: 'x', holder: 'id:1', cause })
      assert.equal(e.code, code)
      assert.equal(e.name, cls.name)
      assert.equal(e.lockName, 'x')
      assert.equal(e.holder, 'id:1')
      assert.equal(e.cause, cause)
      assert.ok(e instanceof cls && e instanceof CrosslockError && e instanceof Error)
      for (const [other] of cases) if (other !== cls) assert.ok(!(e instanceof other), `${cls.name} is not a ${other.name}`)
      assert.match(String(e.stack), new RegExp(`^${cls.name}: message`))
    }
    const base = new CrosslockError('CANCELLED', 'stopped')
    assert.equal(base.code, 'CANCELLED')
    assert.ok(!(base instanceof NotHeldError))
    assert.ok(!(new Error('plain') instanceof CrosslockError))
    assert.ok(!(new TypeError('plain') instanceof InvalidArgumentError))
    assert.ok(!(null instanceof CrosslockError))
  })
})
