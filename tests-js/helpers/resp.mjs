// A tiny RESP2 client over `net`, for what tests check behind crosslock's back: raw layout
// (HGETALL, PTTL), PUBSUB NUMSUB, a plain SUBSCRIBE, and the non-atomic GET/SET counter.
import net from 'node:net'

class Parser {
  constructor () { this.buffer = Buffer.alloc(0) }
  push (chunk) { this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk }
  /** The next complete reply, or undefined. Errors are returned as Error objects. */
  next () {
    const r = this.#parse(0)
    if (r === undefined) return undefined
    this.buffer = this.buffer.subarray(r.end)
    return { value: r.value }
  }

  #line (at) {
    const end = this.buffer.indexOf('\r\n', at)
    return end < 0 ? undefined : { text: this.buffer.toString('utf8', at + 1, end), end: end + 2 }
  }

  #parse (at) {
    if (at >= this.buffer.length) return undefined
    const type = String.fromCharCode(this.buffer[at])
    const line = this.#line(at)
    if (!line) return undefined
    switch (type) {
      case '+': return { value: line.text, end: line.end }
      case '-': return { value: new Error(line.text), end: line.end }
      case ':': return { value: Number(line.text), end: line.end }
      case '$': {
        const len = Number(line.text)
        if (len < 0) return { value: null, end: line.end }
        if (this.buffer.length < line.end + len + 2) return undefined
        return { value: this.buffer.toString('utf8', line.end, line.end + len), end: line.end + len + 2 }
      }
      case '*': {
        const n = Number(line.text)
        if (n < 0) return { value: null, end: line.end }
        const items = []
        let end = line.end
        for (let i = 0; i < n; i++) {
          const item = this.#parse(end)
          if (!item) return undefined
          items.push(item.value)
          end = item.end
        }
        return { value: items, end }
      }
      default: throw new Error(`RESP: unexpected type byte ${JSON.stringify(type)}`)
    }
  }
}

function encode (args) {
  const parts = [`*${args.length}\r\n`]
  for (const a of args) {
    const s = String(a)
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`)
  }
  return parts.join('')
}

function parseUrl (url) {
  const u = new URL(url)
  return { host: u.hostname, port: Number(u.port || 6379) }
}

/** One plain connection: `await redis.command('HGETALL', key)`. */
export class RawRedis {
  #socket
  #parser = new Parser()
  #pending = []
  #onPush

  constructor (socket, onPush) {
    this.#socket = socket
    this.#onPush = onPush
    socket.on('data', (chunk) => {
      this.#parser.push(chunk)
      let r
      while ((r = this.#parser.next()) !== undefined) this.#reply(r.value)
    })
    socket.on('close', () => {
      for (const p of this.#pending.splice(0)) p.reject(new Error('connection closed'))
    })
    socket.on('error', () => {})
  }

  static connect (url, onPush) {
    const { host, port } = parseUrl(url)
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port })
      socket.once('connect', () => { socket.off('error', reject); resolve(new RawRedis(socket, onPush)) })
      socket.once('error', reject)
    })
  }

  #reply (value) {
    if (this.#onPush && Array.isArray(value) && value[0] === 'message') {
      this.#onPush(value[1], value[2])
      return
    }
    const p = this.#pending.shift()
    if (!p) return
    if (value instanceof Error) p.reject(value)
    else p.resolve(value)
  }

  command (...args) {
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject })
      this.#socket.write(encode(args))
    })
  }

  /** HGETALL as an object. */
  async hgetall (key) {
    const flat = await this.command('HGETALL', key)
    const out = {}
    for (let i = 0; i < flat.length; i += 2) out[flat[i]] = flat[i + 1]
    return out
  }

  /** The server's normal (not pub/sub) connections but this one: id → last command. */
  async clients () {
    const own = String(await this.command('CLIENT', 'ID'))
    const listed = String(await this.command('CLIENT', 'LIST', 'TYPE', 'normal')).split('\n').filter(Boolean)
      .map((line) => Object.fromEntries(line.split(' ').map((f) => f.split('=', 2))))
    return new Map(listed.filter((c) => c.id !== own).map((c) => [c.id, c.cmd]))
  }

  /** PUBSUB NUMSUB for one channel. */
  async numsub (channel) {
    const reply = await this.command('PUBSUB', 'NUMSUB', channel)
    return Number(reply[1])
  }

  close () {
    return new Promise((resolve) => {
      if (this.#socket.destroyed) return resolve()
      this.#socket.once('close', resolve)
      this.#socket.end()
      setTimeout(() => this.#socket.destroy(), 1000).unref()
    })
  }
}

/**
 * A plain SUBSCRIBE client: collects the messages of `channel`; `next(ms)` resolves to the next
 * one (or rejects after `ms`).
 */
export class Subscriber {
  #redis
  #messages = []
  #waiters = []

  static async subscribe (url, channel) {
    const sub = new Subscriber()
    sub.#redis = await RawRedis.connect(url, (ch, payload) => sub.#deliver(payload))
    await sub.#redis.command('SUBSCRIBE', channel)
    return sub
  }

  #deliver (payload) {
    const w = this.#waiters.shift()
    if (w) w(payload)
    else this.#messages.push(payload)
  }

  next (ms = 5000) {
    if (this.#messages.length) return Promise.resolve(this.#messages.shift())
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no message within ${ms} ms`)), ms)
      this.#waiters.push((payload) => { clearTimeout(timer); resolve(payload) })
    })
  }

  close () { return this.#redis.close() }
}
