// A separate Node process that takes a lock and holds it until killed:
//   node hold-process.mjs <redis-url> <lock-name> <watchdog-timeout-ms>
// Prints "held <holder>" once it holds the lock.
import { createRequire } from 'node:module'

const { connect } = createRequire(import.meta.url)('../../')
const [url, name, watchdogTimeout] = process.argv.slice(2)
const client = await connect(url, { watchdogTimeout: Number(watchdogTimeout) })
const held = await client.lock(name).acquire()
process.stdout.write(`held ${held.holder}\n`)
setInterval(() => {}, 1 << 30)
