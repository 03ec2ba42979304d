#!/usr/bin/env node
/**
 * `npx crosslock`: look at locks and synchronizers in a Redis server, whoever took them — Node,
 * Python, Rust or Java's Redisson. The twin of Python's `python -m crosslock`, same output.
 *
 *     crosslock inspect NAME [--url URL] [--json]       who holds NAME, for how long, who waits
 *     crosslock list [PATTERN] [--url URL] [--json]     the objects whose names match (SCAN, never KEYS)
 *     crosslock force-unlock NAME [--url URL] [--yes]   delete a lock whoever holds it (asks first)
 *
 * The server is `--url`, else `$CROSSLOCK_URL`, else `redis://127.0.0.1:6379/0`. Exit status: 0
 * done, 1 nothing there / refused, 2 bad usage or the server unreachable.
 *
 * @module
 */
import { createInterface } from 'node:readline/promises'

import type { Inspection } from '../native'
import { Client } from './client'
import { CrosslockError } from './errors'

const USAGE = `usage: crosslock [--url URL] [--watchdog-timeout SECONDS] inspect NAME [--json]
       crosslock [--url URL] list [PATTERN] [--limit N] [--json]
       crosslock [--url URL] [--watchdog-timeout SECONDS] force-unlock NAME [--yes] [--json]`

const secs = (ms: number | null | undefined): string =>
  ms == null ? 'no expiry' : ms < 10000 ? `${(ms / 1000).toFixed(3)} s` : `${(ms / 1000).toFixed(1)} s`
const inSecs = (epochMs: number | null | undefined): string =>
  epochMs == null ? 'no deadline' : `in ${((epochMs - Date.now()) / 1000).toFixed(1)} s`

/** A few lines a person can read at 3 a.m. */
export function describe(seen: Inspection, watchdogMs = 30000): string {
  if (seen.kind === 'absent') return `${seen.name}: nothing there (free)`
  const lines = [`${seen.name}: ${seen.kind.replace(/_/g, ' ')}${seen.mode ? `, ${seen.mode} mode` : ''}`]
  if (seen.holders.length > 0) {
    const ttl = seen.ttl
    const alive = ttl == null || ttl >= (watchdogMs * 2) / 3 - 1000
    lines.push(`  lease left: ${secs(ttl)}` + (alive
      ? ''
      : `  (not renewed within the last ${(watchdogMs / 3000).toFixed(0)} s: holder dead, paused, cut off, or holding with a short lease)`))
    for (const h of seen.holders) {
      const what = h.write ? 'writer' : seen.mode ? 'reader' : 'holder'
      const extra = h.readLeases.length > 0 ? `; read holds expire in ${h.readLeases.map(secs).join(', ')}` : ''
      lines.push(`  ${what} ${h.holder} × ${h.holds}${extra}`)
    }
  } else if (['lock', 'fenced_lock', 'fair_lock', 'read_write_lock'].includes(seen.kind)) {
    lines.push('  free')
  }
  seen.queue.forEach((w, i) => lines.push(`  waiting #${i + 1}: ${w.holder} (skipped as dead ${inSecs(w.deadline)} unless it tries again)`))
  if (seen.token != null) lines.push(`  last fencing token: ${seen.token}`)
  if (seen.count != null) {
    const label = seen.kind === 'permit_expirable_semaphore' ? 'permits available' : 'count (semaphore permits or latch count)'
    lines.push(`  ${label}: ${seen.count}`)
  }
  for (const p of seen.permits) lines.push(`  permit ${p.id} expires ${inSecs(p.expires)}`)
  return lines.join('\n')
}

function oneLine(seen: Inspection): string {
  let state: string
  if (seen.holders.length > 0) {
    state = `held by ${seen.holders.map((h) => `${h.holder}×${h.holds}`).join(', ')}, ${secs(seen.ttl)} left`
  } else if (seen.count != null) {
    state = `count ${seen.count}`
  } else {
    state = 'free'
  }
  if (seen.queue.length > 0) state += `, ${seen.queue.length} waiting`
  return `${seen.name}\t${seen.kind}\t${state}`
}

async function forceUnlock(client: Client, seen: Inspection): Promise<boolean> {
  switch (seen.kind) {
    case 'lock':
    case 'fenced_lock':
      return await client.lock(seen.name).forceUnlock()
    case 'fair_lock':
      return await client.fairLock(seen.name).forceUnlock()
    case 'read_write_lock': {
      const rw = client.readWriteLock(seen.name)
      return await (seen.mode === 'write' ? rw.writeLock() : rw.readLock()).forceUnlock()
    }
    default:
      throw new Error(`'${seen.name}' is a ${seen.kind}, not a lock: force-unlock only deletes locks`)
  }
}

interface Args { url: string, command: string, rest: string[], json: boolean, yes: boolean, limit: number, watchdogMs: number }

function parse(argv: string[]): Args | string {
  const args: Args = { url: process.env.CROSSLOCK_URL || 'redis://127.0.0.1:6379/0', command: '', rest: [], json: false, yes: false, limit: 1000, watchdogMs: 30000 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--url') args.url = argv[++i] ?? ''
    else if (a === '--json') args.json = true
    else if (a === '--yes') args.yes = true
    else if (a === '--limit') args.limit = Number(argv[++i])
    else if (a === '--watchdog-timeout') args.watchdogMs = Number(argv[++i]) * 1000
    else if (a === '-h' || a === '--help') return USAGE
    else if (a.startsWith('-')) return `crosslock: unknown option ${a}\n${USAGE}`
    else if (!args.command) args.command = a
    else args.rest.push(a)
  }
  const needsName = args.command === 'inspect' || args.command === 'force-unlock'
  const bad = !Number.isFinite(args.watchdogMs) || args.watchdogMs <= 0 || !Number.isInteger(args.limit) || args.limit < 1
  if (bad || !['inspect', 'list', 'force-unlock'].includes(args.command) || (needsName && args.rest.length !== 1) || !args.url) {
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
  try {
    if (args.command === 'inspect') {
      const seen = await client.inspect(args.rest[0] as string)
      out(args.json ? JSON.stringify(seen) : describe(seen, args.watchdogMs))
      return seen.kind === 'absent' ? 1 : 0
    }
    if (args.command === 'list') {
      for (const name of await client.scan(args.rest[0] ?? '*', { limit: args.limit })) {
        const seen = await client.inspect(name)
        out(args.json ? JSON.stringify(seen) : oneLine(seen))
      }
      return 0
    }
    const name = args.rest[0] as string
    const seen = await client.inspect(name)
    if (seen.holders.length === 0) {
      out(`${name}: nothing to unlock (${seen.kind})`)
      return 1
    }
    if (!args.yes) {
      out(describe(seen, args.watchdogMs))
      const rl = createInterface({ input: process.stdin, output: process.stdout })
      const answer = await rl.question(`Delete '${name}', held by ${seen.holders.length} holder(s)? [y/N] `)
      rl.close()
      if (!['y', 'yes'].includes(answer.trim().toLowerCase())) {
        out('left as it was')
        return 1
      }
    }
    const removed = await forceUnlock(client, seen)
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

if (require.main === module) {
  main(process.argv.slice(2)).then((status) => { process.exitCode = status }, (e) => {
    process.stderr.write(`crosslock: ${(e as Error).stack ?? String(e)}\n`)
    process.exitCode = 2
  })
}
