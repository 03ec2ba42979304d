// The published TypeScript declarations type the public API: tests-js/types/usage.ts (every export
// used as the README does, plus one @ts-expect-error) must compile against bindings-node/dist.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const project = fileURLToPath(new URL('./types/tsconfig.json', import.meta.url))

test('the .d.ts files type the public API', async () => {
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', project], { timeout: 60_000 })
  } catch (e) {
    assert.fail(`tsc reported:\n${e.stdout}${e.stderr}`)
  }
})
