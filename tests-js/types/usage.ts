// Compiled (not run) by types.test.mjs: the published .d.ts must type the public API.
import {
  connect, runAsOwner, newOwner, currentOwner,
  Client, Lock, HeldLock, CrosslockError, NotHeldError, LockTimeoutError, LockLostError,
  RedisUnavailableError, WrongTypeError, InvalidArgumentError,
  type AcquireOptions, type OwnerOptions, type ConnectOptions, type ErrorCode, type MetricsMeterProvider,
  type SpansTracerProvider,
} from '../..'

export async function usage (url: string): Promise<number> {
  const options: ConnectOptions = { connectTimeout: 1000, watchdogTimeout: 30_000 }
  const provider: MetricsMeterProvider = { getMeter: () => ({}) }
  const measured: ConnectOptions[] = [{ metrics: true, metricsWithNames: true }, { metrics: provider }, { metrics: false }]
  void measured
  const tracers: SpansTracerProvider = { getTracer: () => ({}) }
  const traced: ConnectOptions[] = [
    { spans: true, spansLevel: 'all', spansWithNames: true }, { spans: tracers, spansLevel: 'acquires' }, { spans: false },
  ]
  void traced
  const client: Client = await connect(url, options)
  const id: string = client.id
  const lock: Lock = client.lock('orders:42')
  const acquire: AcquireOptions = { wait: 100, lease: 1000, signal: AbortSignal.timeout(10), owner: newOwner() }
  const held: HeldLock = await lock.acquire(acquire)
  const signal: AbortSignal = held.signal
  const lost: boolean = held.lost
  const owner: number = held.owner
  const who: OwnerOptions = { owner }
  const extended: Promise<void> = held.extend(5000)
  await extended
  await lock.extend(5000, who)
  await held.release()
  const maybe: HeldLock | null = await lock.tryAcquire()
  if (maybe) await maybe[Symbol.asyncDispose]()
  const value: number = await lock.withLock(async (h: HeldLock) => h.owner + 1, { wait: 10 })
  const n: number = await runAsOwner(async () => (currentOwner() ?? 0) + (await lock.holdCount(who)))
  const remaining: number | null = await lock.remainingLease()
  const flags: boolean[] = [await lock.isLocked(), await lock.isHeld(who), await lock.forceUnlock(), lost, signal.aborted]
  await lock.release({ owner })
  try {
    await lock.acquire()
  } catch (e) {
    if (e instanceof CrosslockError) {
      const code: ErrorCode = e.code
      const name: string | undefined = e.lockName
      const holder: string | undefined = e.holder
      void [code, name, holder]
    }
    void [e instanceof NotHeldError, e instanceof LockTimeoutError, e instanceof LockLostError,
      e instanceof RedisUnavailableError, e instanceof WrongTypeError, e instanceof InvalidArgumentError]
  }
  await client[Symbol.asyncDispose]()
  await client.close()
  void [id, remaining, flags, n]
  return value
}

// @ts-expect-error a lock name is a string
export const wrong = (c: Client) => c.lock(42)
