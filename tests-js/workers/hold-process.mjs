// A separate Node process that takes a lock:
//   node hold-process.mjs <redis-url> <lock-name> <watchdog-timeout-ms> [hold|exit]
// Prints "held <holder>" once it holds the lock; then holds it until killed ('hold', the default),
// or lets the process end by itself without closing the client ('exit').
import { createRequire } from 'node:module'

const { connect } = createRequire(import.meta.url)('../../')
const [url, name, watchdogTimeout, mode = 'hold'] = process.argv.slice(2)
const client = await connect(url, { watchdogTimeout: Number(watchdogTimeout) })
const held = await client.lock(name).acquire()
process.stdout.write(`held ${held.holder}\n`)
if (mode === 'hold') setInterval(() => {}, 1 << 30)
