// The lost signal right after a pause (issue 52, item 0): a holder process frozen (SIGSTOP, a GC
// pause or a stalled VM) past its lease resumes after another client took the lock. Its very first
// statement after resuming reads `held.lost` and `held.signal.aborted`: both must be true already,
// decided from the clock rather than left to the watchdog to notice a moment later; its release
// rejects with LOCK_LOST. Lock and FencedLock, with a lease and with the watchdog, several runs.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { unique, useRedis, within } from './helpers/util.mjs'

const env = useRedis()

/** The holder's lease (and its watchdog timeout), ms. */
const LEASE = 500
/** How many pauses each variant goes through. */
const RUNS = 2

const script = fileURLToPath(new URL('./workers/paused-process.mjs', import.meta.url))

/** The child's stdout, line by line: `next(prefix)` resolves with the rest of the next line. */
function lines (child) {
  const seen = []
  const waiting = []
  let buffer = ''
  child.stdout.on('data', (chunk) => {
    buffer += chunk
    const complete = buffer.split('\n')
    buffer = complete.pop()
    for (const line of complete) {
      const w = waiting.shift()
      if (w) w(line)
      else seen.push(line)
    }
  })
  return (what) =>
    within(
      seen.length > 0 ? Promise.resolve(seen.shift()) : new Promise((resolve) => waiting.push(resolve)),
      15_000,
      what,
    )
}

describe('the lost signal after a pause', () => {
  for (const kind of ['lock', 'fencedLock']) {
    for (const lease of ['lease', 'watchdog']) {
      test(`${kind}, ${lease}: held.lost and held.signal say lost on the first read after a pause past the lease`, async () => {
        for (let run = 0; run < RUNS; run++) {
          const name = unique(`paused-${kind}-${lease}`)
          const args = [script, env.url, kind, name, lease === 'lease' ? String(LEASE) : '-', String(LEASE)]
          const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] })
          try {
            const next = lines(child)
            assert.equal(await next('the child to hold the lock'), 'held')
            child.kill('SIGSTOP')
            // Another client takes the lock once its lease has run out in Redis (the frozen holder
            // renews nothing); a fenced lock's token is then greater than the holder's.
            const other = await env.client[kind](name).acquire({ wait: 10_000 })
            await sleep(100)
            // The line waits for the holder when it resumes: it reads it, then `lost`.
            child.stdin.write('go\n')
            child.kill('SIGCONT')
            assert.equal(await next('the first read'), 'first true true', `run ${run}`)
            assert.equal(await next('the release'), 'refused LOCK_LOST', `run ${run}`)
            assert.equal(await next('the read after'), 'after true true', `run ${run}`)
            await within(once(child, 'exit'), 15_000, 'the child to exit')
            await other.release()
          } finally {
            child.kill('SIGKILL')
          }
        }
      })
    }
  }
})
