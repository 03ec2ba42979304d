// A tiny RESP2 client so the interop tests can look at Redis without crosslock or Redisson: the raw
// lock layout (HGETALL, PTTL), who is subscribed (PUBSUB NUMSUB), and what is published on a channel.
//
// @example
//   const r = await RawRedis.connect('redis://127.0.0.1:7001/0')
//   await r.command('SET', 'k', '1')
//   assert.equal(await r.command('GET', 'k'), '1')
//   r.close()
import net from 'node:net'

/** An error reply (`-ERR ...`) from Redis. */
export class RedisReplyError extends Error {}

// Parses one reply at `pos` of `buf`; returns [value, nextPos] or null when incomplete.
function parse (buf, pos) {
  const eol = buf.indexOf('\r\n', pos)
  if (eol < 0) return null
  const kind = String.fromCharCode(buf[pos])
  const rest = buf.subarray(pos + 1, eol).toString()
  const next = eol + 2
  switch (kind) {
    case '+': return [rest, next]
    case '-': return [new RedisReplyError(rest), next]
    case ':': return [Number(rest), next]
    case '$': {
      const n = Number(rest)
      if (n < 0) return [null, next]
      if (buf.length < next + n + 2) return null
      return [buf.subarray(next, next + n).toString(), next + n + 2]
    }
    case '*': {
      const n = Number(rest)
      if (n < 0) return [null, next]
      const items = []
      let at = next
      for (let i = 0; i < n; i++) {
        const r = parse(buf, at)
        if (!r) return null
        items.push(r[0])
        at = r[1]
      }
      return [items, at]
    }
    default: throw new Error(`unexpected RESP line ${JSON.stringify(buf.subarray(pos, eol).toString())}`)
  }
}

/** One connection; replies come back as strings, numbers, arrays or null. */
export class RawRedis {
  #sock
  #buf = Buffer.alloc(0)
  #replies = [] // parsed, not yet read
  #readers = [] // pending read() resolvers
  #closed = false

  static async connect (url) {
    const u = new URL(url)
    const sock = net.connect(Number(u.port || 6379), u.hostname || '127.0.0.1')
    await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject) })
    const r = new RawRedis(sock)
    const db = Number(u.pathname.slice(1) || 0)
    if (db) await r.command('SELECT', db)
    return r
  }

  constructor (sock) {
    this.#sock = sock
    sock.on('data', (chunk) => {
      this.#buf = Buffer.concat([this.#buf, chunk])
      for (;;) {
        const r = parse(this.#buf, 0)
        if (!r) break
        this.#buf = this.#buf.subarray(r[1])
        this.#deliver(r[0])
      }
    })
    sock.on('error', () => {})
    sock.on('close', () => {
      this.#closed = true
      for (const w of this.#readers.splice(0)) w.resolve(new Error('redis closed the connection'))
    })
  }

  #deliver (value) {
    const w = this.#readers.shift()
    if (w) w.resolve(value)
    else this.#replies.push(value)
  }

  /** Send one command without reading its reply. */
  send (...args) {
    const parts = args.map((a) => String(a))
    this.#sock.write(`*${parts.length}\r\n` + parts.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(''))
  }

  /** Read one reply (or pub/sub message); rejects if nothing arrives within `timeout` ms. */
  async read (timeout = 10000) {
    let value
    if (this.#replies.length) {
      value = this.#replies.shift()
    } else {
      if (this.#closed) throw new Error('redis closed the connection')
      let timer
      const waiter = {}
      value = await new Promise((resolve, reject) => {
        waiter.resolve = resolve
        this.#readers.push(waiter)
        timer = setTimeout(() => {
          this.#readers.splice(this.#readers.indexOf(waiter), 1)
          reject(new Error(`no reply from redis within ${timeout} ms`))
        }, timeout)
      }).finally(() => clearTimeout(timer))
    }
    if (value instanceof Error) throw value
    return value
  }

  /** Send one command and return its reply (throws RedisReplyError on an error reply). */
  async command (...args) {
    this.send(...args)
    return this.read()
  }

  async hgetall (key) {
    const flat = await this.command('HGETALL', key)
    const out = {}
    for (let i = 0; i < flat.length; i += 2) out[flat[i]] = flat[i + 1]
    return out
  }

  /** How many connections are subscribed to `channel` (PUBSUB NUMSUB). */
  async numsub (channel) {
    return Number((await this.command('PUBSUB', 'NUMSUB', channel))[1])
  }

  close () { this.#sock.destroy() }
}
