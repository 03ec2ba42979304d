// crosslock's TypeScript declarations compile for a user with strict settings and the defaults
// otherwise: no @types/node in scope (TypeScript ≥ 6 no longer loads it unless asked) and the
// default library of an ES2022 target, so the declarations must bring what they use themselves
// (Uint8Array, not Buffer; the disposable library for `await using`).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
// The TypeScript the package builds with, and the newest (7.x, the native compiler).
const COMPILERS = {
  typescript: path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
  typescript7: path.join(ROOT, 'node_modules', 'typescript7', 'bin', 'tsc')
}

const USER = `
import { connect, MultiLock, LockTimeoutError, type Inspection } from 'crosslock'

async function main(): Promise<void> {
  const client = await connect('redis://127.0.0.1:6379/0', { tlsCaCert: new Uint8Array(0) })
  await using held = await client.lock('orders:42').acquire({ wait: 100, signal: AbortSignal.timeout(1000) })
  const token: bigint = (await client.fencedLock('ledger').acquire()).token
  const seen: Inspection = await client.inspect('orders:42')
  const both = await new MultiLock([client.lock('a'), client.fairLock('b')]).tryAcquire()
  console.log(held.owner, token, seen.holders.length, both?.parts, LockTimeoutError.name)
  await client.close()
}
void main()
`

for (const [name, tsc] of Object.entries(COMPILERS)) test(`the declarations compile under --strict without @types/node, for an ES2022 target (${name})`, () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'crosslock-types-'))
  try {
    mkdirSync(path.join(dir, 'node_modules'))
    symlinkSync(ROOT, path.join(dir, 'node_modules', 'crosslock'), 'dir')
    writeFileSync(path.join(dir, 'user.ts'), USER)
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true, noEmit: true, target: 'es2022', types: [],
        module: 'nodenext', moduleResolution: 'nodenext', skipLibCheck: false
      },
      files: ['user.ts']
    }))
    const version = spawnSync(process.execPath, [tsc, '--version'], { encoding: 'utf8' }).stdout.trim()
    const run = spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8', timeout: 120000 })
    assert.equal(run.status, 0, `${version}:\n${run.stdout}${run.stderr}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
