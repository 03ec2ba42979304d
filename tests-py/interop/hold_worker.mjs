// One Node process holding locks for the cross-language tests (the twin of hold_worker.py):
//   node hold_worker.mjs URL [FAIR_WAIT_MS]
// Prints READY once connected; then one reply line per stdin command:
//   acquire KIND NAME -> waits (no wait limit), then "ACQUIRED TOKEN" (a fenced lock's token, else -)
//   release           -> releases the last lock acquired, then "RELEASED"
//   quit              -> exits
import { createRequire } from 'node:module'
import readline from 'node:readline'

const { connect } = createRequire(import.meta.url)('../../')

const [url, fairWaitMs] = process.argv.slice(2)
const client = await connect(url, fairWaitMs ? { fairLockWaitTimeout: Number(fairWaitMs) } : undefined)
const make = {
  lock: (n) => client.lock(n),
  fair: (n) => client.fairLock(n),
  spin: (n) => client.spinLock(n),
  fenced: (n) => client.fencedLock(n),
  nonReentrant: (n) => client.nonReentrantLock(n),
  read: (n) => client.readWriteLock(n).readLock(),
  write: (n) => client.readWriteLock(n).writeLock()
}
const held = []
console.log('READY')
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [command, kind, name] = line.trim().split(/\s+/)
  if (!command) continue
  if (command === 'acquire') {
    const hold = await make[kind](name).acquire()
    held.push(hold)
    console.log(`ACQUIRED ${hold.token ?? '-'}`)
  } else if (command === 'release') {
    await held.pop().release()
    console.log('RELEASED')
  } else if (command === 'quit') {
    break
  } else {
    throw new Error(`unknown command ${line}`)
  }
}
await client.close()
process.exit(0)
