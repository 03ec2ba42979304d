// The smoke run on each Node release: the installed tarball (not the checkout) connects, takes a
// lock, takes and gives back a semaphore's permits, and closes.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'

import { connect } from 'crosslock'

assert.match(createRequire(import.meta.url).resolve('crosslock'), /node_modules\/crosslock\//)
const client = await connect(process.argv[2])
const name = (what) => `smoke:${what}:${process.version}` // one server serves every release's run
const held = await client.lock(name('lock')).acquire()
assert.equal(await client.lock(name('lock')).isHeld({ owner: held.owner }), true)
await held.release()
assert.equal(await client.lock(name('lock')).isLocked(), false)
const semaphore = client.semaphore(name('semaphore'))
assert.equal(await semaphore.trySetPermits(2), true)
assert.equal(await semaphore.tryAcquire({ permits: 2 }), true)
assert.equal(await semaphore.availablePermits(), 0)
await semaphore.release(2)
assert.equal(await semaphore.availablePermits(), 2)
await client.close()
console.log('smoke ok', process.version)
