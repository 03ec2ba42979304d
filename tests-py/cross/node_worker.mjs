// A Node process taking part in a cross-language test (same modes and environment as py_worker.py):
//   node_worker.mjs URL hold NAME | wait NAME | counter NAME KEY N | tokens NAME N | chaos NAME SECONDS
//                   | permits NAME SECONDS
// $CROSSLOCK_KIND picks the lock type (lock, fair_lock, …, read_lock, write_lock);
// $CROSSLOCK_FAIR_WAIT the client's fair-lock wait (seconds); $CROSSLOCK_WAIT the wait limit of
// "wait" (seconds, default 30, "inf" for none).
import { createRequire } from 'node:module'
import net from 'node:net'
import readline from 'node:readline'

const { connect, runAsOwner } = createRequire(import.meta.url)('../../')

/**
 * A reader of CLOCK_MONOTONIC in nanoseconds (as a string): the clock the Python worker's
 * `time.monotonic_ns()` and the Java driver's `System.nanoTime()` read, so the test can order
 * events across processes. Node's `process.hrtime` reads it; Bun's and Deno's count from their own
 * start, so there it is asked of libc through the runtime's FFI (`bun:ffi`, `Deno.dlopen`).
 */
async function monotonicClock () {
  const CLOCK_MONOTONIC = 1
  const read = (clockGettime) => {
    const ts = new BigInt64Array(2) // struct timespec { tv_sec; tv_nsec } on 64-bit Linux
    if (clockGettime(CLOCK_MONOTONIC, ts) !== 0) throw new Error('clock_gettime(CLOCK_MONOTONIC) failed')
    return (ts[0] * 1_000_000_000n + ts[1]).toString()
  }
  if (globalThis.Bun) {
    const { dlopen, FFIType } = await import('bun:ffi')
    const { symbols } = dlopen('libc.so.6', { clock_gettime: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 } })
    return () => read(symbols.clock_gettime)
  }
  if (globalThis.Deno) {
    const { symbols } = globalThis.Deno.dlopen('libc.so.6', { clock_gettime: { parameters: ['i32', 'buffer'], result: 'i32' } })
    return () => read(symbols.clock_gettime)
  }
  return () => process.hrtime.bigint().toString()
}
const now = await monotonicClock()

// Just enough RESP for GET and SET, so workers need no Redis client library.
function raw (url) {
  const [host, port] = url.split('//')[1].split('/')[0].split(':')
  const sock = net.connect(Number(port), host)
  let buf = ''
  const waiting = []
  sock.setEncoding('utf8')
  sock.on('data', (d) => {
    buf += d
    for (;;) {
      const eol = buf.indexOf('\r\n')
      if (eol < 0) return
      const line = buf.slice(0, eol)
      if (line[0] === '$') {
        const n = Number(line.slice(1))
        if (n < 0) { buf = buf.slice(eol + 2); waiting.shift()(null); continue }
        if (buf.length < eol + 2 + n + 2) return
        const data = buf.slice(eol + 2, eol + 2 + n)
        buf = buf.slice(eol + 2 + n + 2)
        waiting.shift()(data)
      } else {
        buf = buf.slice(eol + 2)
        waiting.shift()(line.slice(1))
      }
    }
  })
  return {
    call: (...args) => new Promise((resolve) => {
      waiting.push(resolve)
      sock.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(''))
    }),
    close: () => sock.end()
  }
}

const [url, mode, name, key, n] = process.argv.slice(2)
const kind = process.env.CROSSLOCK_KIND ?? 'lock'
const fairWait = Number(process.env.CROSSLOCK_FAIR_WAIT ?? '300') * 1000
const client = await connect(url, { fairLockWaitTimeout: fairWait })
const camel = kind.replace(/_(.)/g, (_, c) => c.toUpperCase())
const lock = kind === 'read_lock' ? client.readWriteLock(name).readLock()
  : kind === 'write_lock' ? client.readWriteLock(name).writeLock()
    : client[camel](name)
console.log(`READY ${client.id}`)
if (mode === 'hold') {
  const held = await lock.acquire()
  console.log(`HELD ${now()}`)
  const rl = readline.createInterface({ input: process.stdin })
  await new Promise((resolve) => rl.once('line', resolve))
  rl.close()
  const released = now()
  await held.release()
  console.log(`RELEASED ${released}`)
} else if (mode === 'wait') {
  const limit = process.env.CROSSLOCK_WAIT ?? '30'
  const held = await lock.acquire(limit === 'inf' ? {} : { wait: Number(limit) * 1000 })
  console.log(`ACQUIRED ${now()}`)
  await held.release()
} else if (mode === 'tokens') {
  const fenced = client.fencedLock(name)
  for (let i = 0; i < Number(key); i++) {
    await fenced.withLock(async (held) => console.log(`TOKEN ${now()} ${held.token}`))
  }
  console.log('DONE')
} else if (mode === 'counter') {
  const r = raw(url)
  for (let i = 0; i < Number(n); i++) {
    const held = await lock.acquire()
    try {
      const value = Number((await r.call('GET', key)) ?? 0)
      await r.call('SET', key, String(value + 1))
    } finally {
      await held.release()
    }
  }
  r.close()
  console.log('DONE')
} else if (mode === 'chaos') {
  // As py_worker.py's: 6 tasks (3 of them one owner each, the others an owner per acquire) take
  // NAME:x, NAME:f and NAME:rw at random, each wait cut short at random (an abort, a wait limit).
  const end = Date.now() + Number(key) * 1000
  const counts = { ok: 0, bad: 0 }
  const pick = () => {
    const k = Math.floor(Math.random() * 4)
    if (k === 0) return ['x', client.lock(`${name}:x`), 'w']
    if (k === 1) return ['f', client.fairLock(`${name}:f`), 'w']
    const rw = client.readWriteLock(`${name}:rw`)
    return k === 2 ? ['rw', rw.writeLock(), 'w'] : ['rw', rw.readLock(), 'r']
  }
  const inside = async (r, part, how) => {
    let bad
    if (how === 'r') {
      await r.call('INCR', `${name}:rw:r`)
      bad = ((await r.call('GET', `${name}:rw:w`)) ?? '0') !== '0'
      await r.call('DECR', `${name}:rw:r`)
    } else {
      const writers = await r.call('INCR', `${name}:${part}:w`)
      const readers = part === 'rw' ? ((await r.call('GET', `${name}:rw:r`)) ?? '0') : '0'
      bad = writers !== '1' || readers !== '0'
      await r.call('DECR', `${name}:${part}:w`)
    }
    counts[bad ? 'bad' : 'ok']++
  }
  const task = async () => {
    const r = raw(url)
    while (Date.now() < end) {
      const [part, lock, how] = pick()
      let held = null
      try {
        held = Math.random() < 0.5
          ? await lock.acquire({ signal: AbortSignal.timeout(1 + Math.floor(Math.random() * 20)) })
          : await lock.tryAcquire({ wait: Math.floor(Math.random() * 20) })
      } catch (e) {
        if (e.name !== 'TimeoutError') throw e
      }
      if (held === null) continue
      try {
        await inside(r, part, how)
      } finally {
        await held.release()
      }
    }
    r.close()
  }
  await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i < 3 ? runAsOwner(task) : task())))
  console.log(`DONE ${counts.ok} ${counts.bad}`)
} else if (mode === 'permits') {
  // As py_worker.py's: 6 tasks take 1 or 2 of NAME:s's 3 permits or one of NAME:p's 2, each wait
  // cut short at random (an abort, a wait limit), and count the permits in use in Redis.
  const end = Date.now() + Number(key) * 1000
  const counts = { ok: 0, bad: 0 }
  const sem = client.semaphore(`${name}:s`)
  const pes = client.permitExpirableSemaphore(`${name}:p`)
  const inside = async (r, part, permits) => {
    const used = Number(await r.call('INCRBY', `${name}:${part}:used`, String(permits)))
    await r.call('DECRBY', `${name}:${part}:used`, String(permits))
    counts[used > (part === 's' ? 3 : 2) ? 'bad' : 'ok']++
  }
  const task = async () => {
    const r = raw(url)
    while (Date.now() < end) {
      const cut = Math.random() < 0.5
        ? { signal: AbortSignal.timeout(1 + Math.floor(Math.random() * 20)) }
        : { wait: Math.floor(Math.random() * 20) }
      const permits = Math.random() < 0.5 ? 1 + Math.floor(Math.random() * 2) : 0
      try {
        if (permits) {
          if (!(await sem.tryAcquire({ permits, ...cut }))) continue
          try { await inside(r, 's', permits) } finally { await sem.release(permits) }
        } else {
          const permit = await pes.tryAcquire(cut)
          if (permit === null) continue
          try { await inside(r, 'p', 1) } finally { await permit.release() }
        }
      } catch (e) {
        if (e.name !== 'TimeoutError') throw e
      }
    }
    r.close()
  }
  await Promise.all([0, 1, 2, 3, 4, 5].map(task))
  console.log(`DONE ${counts.ok} ${counts.bad}`)
}
await client.close()
