// One Node process of the mixed Java/Python/Node counter test (run by test_redisson_lock.py):
//   node counter_worker.mjs URL LOCK KEY N [KIND [DATA_URL]]
// Connects, prints READY, waits for a line on stdin (the start signal), then N times: acquire the
// lock, GET KEY, SET KEY value+1 (deliberately non-atomic), release. Prints "DONE N". KIND is the
// kind of lock as tests-py/cross names them (lock when not given). The environment's
// CROSSLOCK_WATCHDOG_MS, when set, is the client's watchdog lease.
import { createRequire } from 'node:module'
import net from 'node:net'
import readline from 'node:readline'

const { connect } = createRequire(import.meta.url)('../../')

// Just enough RESP for GET and SET (bulk/simple/error replies), no client library needed.
function rawRedis (url) {
  const u = new URL(url)
  const sock = net.connect(Number(u.port), u.hostname)
  let buf = Buffer.alloc(0)
  const pending = []
  sock.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk])
    for (;;) {
      const eol = buf.indexOf('\r\n')
      if (eol < 0) return
      const line = buf.subarray(0, eol).toString()
      let value
      let used = eol + 2
      if (line[0] === '$') {
        const n = Number(line.slice(1))
        if (n >= 0) {
          if (buf.length < used + n + 2) return
          value = buf.subarray(used, used + n).toString()
          used += n + 2
        } else {
          value = null
        }
      } else if (line[0] === '-') {
        value = new Error(line.slice(1))
      } else {
        value = line.slice(1)
      }
      buf = buf.subarray(used)
      const { resolve, reject } = pending.shift()
      value instanceof Error ? reject(value) : resolve(value)
    }
  })
  return {
    call: (...args) => new Promise((resolve, reject) => {
      pending.push({ resolve, reject })
      sock.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join(''))
    }),
    close: () => sock.end()
  }
}

// DATA_URL (default URL): where KEY lives, when URL is not a plain redis:// one (a sentinel URL).
const [url, name, key, n, kind = 'lock', dataUrl = url] = process.argv.slice(2)
const watchdog = process.env.CROSSLOCK_WATCHDOG_MS
const client = await connect(url, watchdog ? { watchdogTimeout: Number(watchdog) } : {})
const raw = rawRedis(dataUrl)
// The kinds as tests-py/cross names them: lock, fair_lock, …, write_lock.
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
const lock = kind === 'write_lock' ? client.readWriteLock(name).writeLock() : client[camel(kind)](name)
console.log('READY')
const rl = readline.createInterface({ input: process.stdin })
await new Promise((resolve) => rl.once('line', resolve))
rl.close()
process.stdin.destroy()
for (let i = 0; i < Number(n); i++) {
  const held = await lock.acquire()
  try {
    const value = Number((await raw.call('GET', key)) ?? 0)
    await raw.call('SET', key, value + 1)
  } finally {
    await held.release()
  }
}
raw.close()
await client.close()
console.log(`DONE ${n}`)
