// Drive the real Redisson client (tests-java/driver, Redisson 4.7.0 in a JVM) from node --test.
//
// The driver prints `<nanos> READY`, then answers each command line on stdin with one line:
//   <nanos> OK [result]
//   <nanos> ERR <ExceptionSimpleName> [message]
// <nanos> is Java's System.nanoTime() = CLOCK_MONOTONIC, the clock of process.hrtime.bigint(), so Java
// and Node timestamps taken on one machine can be compared. See tests-java/README.md for the commands.
//
// @example
//   const java = await JavaDriver.start()
//   try {
//     await java.connect(url)
//     await java.ok('lockLease orders 60000')
//     assert.equal(await java.ok('isLocked orders'), 'true')
//   } finally {
//     await java.close()
//   }
//
// Commands run in order on one Java thread: a blocking command (lock, tryLockWait, counter) delays
// the answers to everything sent after it. send() does not wait; reply() collects the next answer;
// hasReply() tells whether one has arrived (i.e. whether Java is still blocked).
import { spawn, execFile } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const JAVA_DIR = path.join(REPO, 'tests-java')
const DRIVER = path.join(JAVA_DIR, 'driver')
/** Bound (ms) for commands that should answer at once. */
export const QUICK = 15000

/** The Java driver is missing, did not build, died, timed out or answered ERR unexpectedly. */
export class JavaDriverError extends Error {
  constructor (message) {
    super(message)
    this.name = 'JavaDriverError'
  }
}

function run (file, args, options) {
  return new Promise((resolve) => {
    execFile(file, args, { maxBuffer: 16 << 20, ...options }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, killed: error?.killed ?? false, stdout, stderr })
    })
  })
}

let built = null

/**
 * Build tests-java once per process (`bash tests-java/build.sh`, a no-op when up to date).
 * Rejects (never skips) when java or mvn is missing or the build fails: the Redisson interop
 * cases are part of the suite.
 */
export function ensureBuilt () {
  built ??= (async () => {
    const missing = []
    for (const tool of ['java', 'mvn']) {
      const { code } = await run('bash', ['-c', `command -v ${tool}`])
      if (code !== 0) missing.push(tool)
    }
    if (missing.length) {
      throw new JavaDriverError(`${missing.join(' and ')} not found on PATH: the Redisson interop tests need a JDK 17+ ` +
        'and Maven to build tests-java (Debian: apt-get install openjdk-17-jdk-headless maven), then run ./dev test again')
    }
    const res = await run('bash', [path.join(JAVA_DIR, 'build.sh')], { timeout: 900000 })
    if (res.code !== 0) {
      throw new JavaDriverError(`tests-java/build.sh failed (${res.killed ? 'timed out' : `exit ${res.code}`}):\n${res.stdout}\n${res.stderr}`)
    }
  })()
  return built
}

/**
 * @typedef {object} Reply
 * @property {bigint} nanos   System.nanoTime() when the command finished (CLOCK_MONOTONIC)
 * @property {boolean} ok
 * @property {string|null} value    result after OK (null for a bare OK)
 * @property {string|null} error    Java exception simple name after ERR
 * @property {string|null} message  Java exception message after ERR
 * @property {string} command
 * @property {string} line
 */

/** One tests-java/driver process (one JVM, at most one Redisson client). Always close() it. */
export class JavaDriver {
  /** Build if needed, spawn the driver and wait (at most readyTimeout ms) for READY. */
  static async start ({ readyTimeout = 30000 } = {}) {
    await ensureBuilt()
    const driver = new JavaDriver(spawn('bash', [DRIVER], { cwd: JAVA_DIR, stdio: ['pipe', 'pipe', 'pipe'] }))
    try {
      const line = await driver.#nextLine(readyTimeout, 'READY')
      const parts = line.split(' ')
      if (parts.length !== 2 || parts[1] !== 'READY') {
        throw new JavaDriverError(`java driver: expected '<nanos> READY', got ${JSON.stringify(line)}${driver.#stderrTail()}`)
      }
      driver.readyNanos = BigInt(parts[0])
      return driver
    } catch (err) {
      driver.kill()
      throw err
    }
  }

  #proc
  #lines = [] // received, not yet consumed (null = EOF)
  #waiting = null // { resolve } of a pending #nextLine
  #stderr = []
  #sent = []
  #answered = 0
  #exited
  /** The Redisson client id after connect(). */
  clientId = null

  constructor (proc) {
    this.#proc = proc
    this.#exited = new Promise((resolve) => {
      proc.once('close', resolve)
      proc.once('error', (err) => { this.#stderr.push(`spawn failed: ${err.message}`); resolve() })
    })
    proc.stdin.on('error', () => {}) // EPIPE after the JVM died surfaces as EOF on stdout
    createInterface({ input: proc.stdout }).on('line', (line) => this.#push(line)).on('close', () => this.#push(null))
    createInterface({ input: proc.stderr }).on('line', (line) => {
      this.#stderr.push(line)
      if (this.#stderr.length > 40) this.#stderr.shift()
    })
  }

  get pid () { return this.#proc.pid }

  #push (line) {
    if (this.#waiting) {
      const w = this.#waiting
      this.#waiting = null
      w(line)
    } else {
      this.#lines.push(line)
    }
  }

  #stderrTail () {
    return this.#stderr.length ? `\njava driver stderr (tail):\n  ${this.#stderr.slice(-15).join('\n  ')}` : ''
  }

  async #nextLine (timeout, waitingFor) {
    let line
    if (this.#lines.length) {
      line = this.#lines.shift()
    } else {
      let timer
      line = await new Promise((resolve, reject) => {
        this.#waiting = resolve
        timer = setTimeout(() => {
          this.#waiting = null
          reject(new JavaDriverError(`java driver: no answer to ${JSON.stringify(waitingFor)} within ${timeout} ms${this.#stderrTail()}`))
        }, timeout)
      }).finally(() => clearTimeout(timer))
    }
    if (line === null) {
      this.#lines.unshift(null) // stay at EOF
      throw new JavaDriverError(`java driver exited (code ${this.#proc.exitCode}) while waiting for ${JSON.stringify(waitingFor)}${this.#stderrTail()}`)
    }
    return line
  }

  /** Send one command without waiting for its answer (collect it later with reply()). */
  send (command) {
    if (command.includes('\n')) throw new TypeError('one command per call')
    if (!this.#proc.stdin.writable) throw new JavaDriverError(`java driver: cannot send ${JSON.stringify(command)}: stdin closed${this.#stderrTail()}`)
    this.#proc.stdin.write(command + '\n')
    this.#sent.push(command)
  }

  /** The answer to the oldest unanswered command, waiting at most `timeout` ms. @returns {Promise<Reply>} */
  async reply (timeout = QUICK) {
    if (this.#answered >= this.#sent.length) throw new JavaDriverError('java driver: reply() without an outstanding command')
    const command = this.#sent[this.#answered]
    const line = await this.#nextLine(timeout, command)
    this.#answered++
    const m = /^(\d+) (OK|ERR)(?: (.*))?$/.exec(line)
    if (!m) throw new JavaDriverError(`java driver: malformed answer ${JSON.stringify(line)} to ${JSON.stringify(command)}`)
    const nanos = BigInt(m[1])
    if (m[2] === 'OK') return { nanos, ok: true, value: m[3] ?? null, error: null, message: null, command, line }
    const rest = m[3] ?? ''
    const sp = rest.indexOf(' ')
    return {
      nanos,
      ok: false,
      value: null,
      error: sp < 0 ? rest : rest.slice(0, sp),
      message: sp < 0 ? null : rest.slice(sp + 1),
      command,
      line
    }
  }

  /** True if an answer (or EOF) has arrived that reply() has not returned yet. */
  hasReply () { return this.#lines.length > 0 }

  /** Send `command` and return its answer (OK or ERR). @returns {Promise<Reply>} */
  async call (command, timeout = QUICK) {
    this.send(command)
    return this.reply(timeout)
  }

  /** Send `command`, require OK and return its result (null for a bare OK). */
  async ok (command, timeout = QUICK) {
    return this.expectOk(await this.call(command, timeout))
  }

  /** reply.value, or throw JavaDriverError if it is an ERR. */
  expectOk (reply) {
    if (!reply.ok) throw new JavaDriverError(`java driver: ${JSON.stringify(reply.command)} failed: ${reply.line}${this.#stderrTail()}`)
    return reply.value
  }

  /** Create the Redisson client (Redisson.create); returns and remembers its client id. */
  async connect (url, watchdogMs) {
    const id = await this.ok(watchdogMs == null ? `connect ${url}` : `connect ${url} ${Math.trunc(watchdogMs)}`, 60000)
    if (!id) throw new JavaDriverError('connect returned no client id')
    this.clientId = id
    return id
  }

  /** Redisson's holder field for the driver thread: `<client-uuid>:<java-thread-id>`. */
  async holder () {
    if (!this.clientId) throw new JavaDriverError('connect first')
    return `${this.clientId}:${await this.ok('threadid')}`
  }

  /** SIGKILL the JVM (a crashed Java holder: its locks stay until their lease ends). */
  kill () {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill('SIGKILL')
  }

  /** `quit` (Redisson shutdown) when idle, else kill; resolves once the process is gone. */
  async close (timeout = 5000) {
    const alive = this.#proc.exitCode === null && this.#proc.signalCode === null
    if (alive && this.#answered === this.#sent.length && this.#proc.stdin.writable) {
      this.#proc.stdin.end('quit\n')
      let timer
      const quit = await Promise.race([
        this.#exited.then(() => true),
        new Promise((resolve) => { timer = setTimeout(() => resolve(false), timeout) })
      ])
      clearTimeout(timer)
      if (quit) return
    }
    this.kill()
    await this.#exited
  }
}

