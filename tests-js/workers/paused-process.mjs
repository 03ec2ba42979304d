// A separate Node process that holds a lock while the test freezes it (SIGSTOP) past its lease:
//   node paused-process.mjs <redis-url> <lock|fencedLock> <lock-name> <lease-ms|-> <watchdog-ms>
// Prints "held" once it holds the lock, then waits for one line on stdin (the test stops this
// process, sends the line, then resumes it). The first statement after the line arrives reads
// `held.lost` and `held.signal.aborted` and prints "first <lost> <aborted>"; then it releases and
// prints "released" or "refused <code>", then "after <lost> <aborted>", and exits.
import { createRequire } from 'node:module'

const { connect } = createRequire(import.meta.url)('../../')
const [url, kind, name, lease, watchdogTimeout] = process.argv.slice(2)
const client = await connect(url, { watchdogTimeout: Number(watchdogTimeout) })
const held = await client[kind](name).acquire(lease === '-' ? {} : { lease: Number(lease) })
process.stdout.write('held\n')
process.stdin.once('data', async () => {
  // The first statement after the pause: nothing may have told the holder yet but the clock.
  const first = `first ${held.lost} ${held.signal.aborted}\n`
  process.stdout.write(first)
  try {
    await held.release()
    process.stdout.write('released\n')
  } catch (e) {
    process.stdout.write(`refused ${e.code}\n`)
  }
  process.stdout.write(`after ${held.lost} ${held.signal.aborted}\n`)
  await client.close()
  process.exit(0)
})
