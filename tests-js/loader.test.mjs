// On a platform the package ships no addon for, loading crosslock says so and says what to do
// (not napi-rs's generic "npm has a bug related to optional dependencies").
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

test('a missing native addon is reported with the shipped platforms and how to build one', (t) => {
  // The generated loader alone, without the .node file beside it: what a user on another
  // platform gets.
  const dir = mkdtempSync(path.join(tmpdir(), 'crosslock-loader-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  copyFileSync(path.join(ROOT, 'bindings-node', 'native.js'), path.join(dir, 'native.js'))
  const require = createRequire(path.join(dir, 'index.js'))
  assert.throws(() => require('./native.js'), (e) => {
    assert.match(e.message, new RegExp(`no prebuilt native addon for ${process.platform}-${process.arch}`))
    assert.match(e.message, /ships one for Linux x86-64/)
    assert.match(e.message, /npm install && npm run build/)
    assert.doesNotMatch(e.message, /optional dependencies/)
    assert.ok(e.cause, 'the load errors are kept as the cause')
    return true
  })
})
