#!/usr/bin/env node
/**
 * `npx crosslock`: look at locks and synchronizers in a Redis server, whoever took them — Node,
 * Python, Rust or Java's Redisson. The twin of Python's `python -m crosslock`, same output.
 *
 *     crosslock inspect NAME [--url URL] [--json]       who holds NAME, for how long, who waits
 *     crosslock list [PATTERN] [--url URL] [--json]     the crosslock/Redisson objects whose names match
 *                   [--all]                             (SCAN, never KEYS); --all: every key
 *     crosslock watch NAME [--url URL] [--json]         follow NAME live until Ctrl-C: acquire, release,
 *                                                       expiry, force-unlock, queue and count changes
 *     crosslock force-unlock NAME [--url URL] [--yes]   delete a lock whoever holds it (asks first)
 *
 * The server is `--url`, else `$CROSSLOCK_URL`, else `redis://127.0.0.1:6379/0`. Exit status: 0
 * done, 1 nothing there / refused, 2 bad usage or the server unreachable.
 *
 * @module
 */
import { createInterface } from 'node:readline/promises'

import native = require('../native')
import { Client } from './client'
import { CrosslockError, invalidArgument, viaNative } from './errors'

/** A non-empty object name, or the invalid-argument error. */
function checked(name: string | undefined): string {
  if (typeof name !== 'string' || name === '') throw invalidArgument('type', 'an object name must be a non-empty string such as \'orders:42\'')
  return name
}

const USAGE = `usage: crosslock inspect NAME [--url URL] [--watchdog-timeout SECONDS] [--json]
       crosslock list [PATTERN] [--url URL] [--limit N] [--all] [--json]
       crosslock watch NAME [--url URL] [--interval SECONDS] [--json]
       crosslock force-unlock NAME [--url URL] [--watchdog-timeout SECONDS] [--yes] [--json]
Options go before or after the command and its NAME. The server is --url, else $CROSSLOCK_URL,
else redis://127.0.0.1:6379/0. list shows what is recognisably crosslock's or Redisson's; --all
shows every key (an idle semaphore or latch is a string holding a number, like any app counter).`

/** What a list shows by default: what only crosslock or Redisson leave. */
const OURS = new Set(['lock', 'fenced_lock', 'fair_lock', 'read_write_lock', 'permit_expirable_semaphore', 'semaphore', 'count_down_latch'])

interface Args { url: string, command: string, rest: string[], json: boolean, yes: boolean, all: boolean, limit: number, watchdogMs: number, intervalMs: number }

function parse(argv: string[]): Args | string {
  const args: Args = { url: process.env.CROSSLOCK_URL || 'redis://127.0.0.1:6379/0', command: '', rest: [], json: false, yes: false, all: false, limit: 1000, watchdogMs: native.clientDefaults().watchdogTimeout, intervalMs: 100 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--url') args.url = argv[++i] ?? ''
    else if (a === '--json') args.json = true
    else if (a === '--yes') args.yes = true
    else if (a === '--all') args.all = true
    else if (a === '--limit') args.limit = Number(argv[++i])
    else if (a === '--watchdog-timeout') args.watchdogMs = Number(argv[++i]) * 1000
    else if (a === '--interval') args.intervalMs = Number(argv[++i]) * 1000
    else if (a === '-h' || a === '--help') return USAGE
    else if (a.startsWith('-')) return `crosslock: unknown option ${a}\n${USAGE}`
    else if (!args.command) args.command = a
    else args.rest.push(a)
  }
  const needsName = ['inspect', 'watch', 'force-unlock'].includes(args.command)
  const bad = !Number.isFinite(args.watchdogMs) || args.watchdogMs <= 0 || !Number.isInteger(args.limit) || args.limit < 1 || !(args.intervalMs >= 10)
  if (bad || !['inspect', 'list', 'watch', 'force-unlock'].includes(args.command) || (needsName && args.rest.length !== 1) || !args.url) {
    return USAGE
  }
  return args
}

/** Runs the command line `argv` (without `node` and the script); resolves to the exit status. */
export async function main(argv: string[], out: (line: string) => void = console.log): Promise<number> {
  const args = parse(argv)
  if (typeof args === 'string') {
    process.stderr.write(args + '\n')
    return 2
  }
  let client: Client
  try {
    client = await Client._connect(args.url, { connectTimeout: 3000 })
  } catch (e) {
    process.stderr.write(`crosslock: ${(e as Error).message}\n`)
    return 2
  }
  // The data, its text and the force-unlock come from core; this file only parses and prints.
  const native = client._native
  try {
    if (args.command === 'inspect') {
      const { inspection, text } = await viaNative(() => native.describe(checked(args.rest[0]), args.watchdogMs))
      out(args.json ? JSON.stringify(inspection) : text)
      return inspection.kind === 'absent' ? 1 : 0
    }
    if (args.command === 'list') {
      for (const name of await client.scan(args.rest[0] ?? '*', { limit: args.limit })) {
        const { inspection, line } = await viaNative(() => native.describe(name, args.watchdogMs))
        if (args.all || OURS.has(inspection.kind)) out(args.json ? JSON.stringify(inspection) : line)
      }
      return 0
    }
    if (args.command === 'watch') return await watch(client, args, out)
    const name = checked(args.rest[0])
    const { inspection: seen, text } = await viaNative(() => native.describe(name, args.watchdogMs))
    if (seen.holders.length === 0) {
      out(`${name}: nothing to unlock (${seen.kind})`)
      return 1
    }
    if (!args.yes) {
      out(text)
      const rl = createInterface({ input: process.stdin, output: process.stdout })
      const answer = await rl.question(`Delete '${name}', held by ${seen.holders.length} holder(s)? [y/N] `)
      rl.close()
      if (!['y', 'yes'].includes(answer.trim().toLowerCase())) {
        out('left as it was')
        return 1
      }
    }
    const removed = await viaNative(() => native.forceUnlockAny(name))
    out(args.json
      ? JSON.stringify({ removed, was: seen })
      : `${name}: ${removed ? `unlocked; it held ${seen.holders.map((h) => h.holder).join(', ')}` : 'already free'}`)
    return removed ? 0 : 1
  } catch (e) {
    process.stderr.write(`crosslock: ${(e as Error).message}\n`)
    const code = e instanceof CrosslockError ? e.code : ''
    return code === 'UNAVAILABLE' || code === 'AUTH' ? 2 : 1
  } finally {
    await client.close()
  }
}

/** Prints the object's state, then one line (or JSON object) per change, until Ctrl-C. */
async function watch(client: Client, args: Args, out: (line: string) => void): Promise<number> {
  const name = checked(args.rest[0])
  const live = await client.watch(name, { interval: args.intervalMs })
  const stop = (): void => live.close()
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  try {
    const { text } = await viaNative(() => client._native.describe(name, args.watchdogMs))
    if (args.json) out(JSON.stringify({ event: 'start', name, state: live.initial }))
    else out(`${text}\nwatching (Ctrl-C to stop)`)
    for await (const event of live) out(args.json ? JSON.stringify(event) : event.text)
    return 0
  } finally {
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
    live.close()
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((status) => { process.exitCode = status }, (e) => {
    process.stderr.write(`crosslock: ${(e as Error).stack ?? String(e)}\n`)
    process.exitCode = 2
  })
}
