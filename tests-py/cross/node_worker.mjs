// A Node process taking part in a cross-language test (same modes and environment as py_worker.py):
//   node_worker.mjs URL hold NAME | wait NAME | counter NAME KEY N | tokens NAME N
// $CROSSLOCK_KIND picks the lock type (lock, fair_lock, …, read_lock, write_lock);
// $CROSSLOCK_FAIR_WAIT the client's fair-lock wait (seconds); $CROSSLOCK_WAIT the wait limit of
// "wait" (seconds, default 30, "inf" for none).
import { createRequire } from 'node:module'
import net from 'node:net'
import readline from 'node:readline'

const { connect } = createRequire(import.meta.url)('../../')
const now = () => process.hrtime.bigint().toString()

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
}
await client.close()
