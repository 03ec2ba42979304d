// Core owns the connect defaults: an option left out is left to core (`ClientOptions::default()`),
// the native module hands core's values to the TypeScript layer (`clientDefaults()`, which the CLI
// reads), and a client connected with no options runs on them. The defaults written in the doc
// comments and docs are tied to core's values by core/tests/house_rules.rs
// (`written_connect_defaults_are_cores`); tests-py/test_connect_defaults.py is Python's twin.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { native, unique, useRedis } from './helpers/util.mjs'

const env = useRedis()

describe('connect defaults', () => {
  test("the native module hands over core's defaults, in milliseconds", () => {
    // The values core's ClientOptions::default() documents (a change there is a change here).
    assert.deepEqual({ ...native.clientDefaults() }, {
      connectTimeout: 5000,
      responseTimeout: 3000,
      watchdogTimeout: 30000,
      watchdogBatchSize: 100,
      fairLockWaitTimeout: 300000,
      replicaWaitTimeout: 1000,
      lanes: 'all'
    })
  })

  test("a client connected with no options leases for core's watchdog timeout", async () => {
    const { watchdogTimeout } = native.clientDefaults()
    const name = unique('defaults')
    const held = await env.client.lock(name).acquire()
    try {
      const pttl = await env.raw.command('PTTL', name)
      // The lease is the watchdog timeout, renewed every third of it: never above, never under 2/3.
      assert.ok(pttl > (watchdogTimeout * 2) / 3 && pttl <= watchdogTimeout, `PTTL ${pttl} of ${watchdogTimeout}`)
    } finally {
      await held.release()
    }
  })

  test('options given as undefined are left to core', async () => {
    const client = await env.connect({ connectTimeout: undefined, watchdogTimeout: undefined, replicaWaitTimeout: undefined, lanes: undefined })
    const name = unique('defaults')
    const held = await client.lock(name).acquire()
    try {
      assert.ok((await env.raw.command('PTTL', name)) <= native.clientDefaults().watchdogTimeout)
    } finally {
      await held.release()
    }
  })
})
