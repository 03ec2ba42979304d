// GroupLock against the real Redisson (4.7.0 in a JVM, see tests-java/): Redisson's
// getMultiLock(group, values) and ours name the same fields (Kryo5Codec, StringCodec), exclude
// each other on overlapping value sets and not on disjoint ones, and a release on either side
// wakes the other side's waiter (leases are 30 s, so only the release can hand over in time).
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'

import { JavaDriver } from './java-driver.mjs'
import { startRedis } from '../helpers/redis-server.mjs'
import { RawRedis } from '../helpers/resp.mjs'
import { background, channelOf, crosslock, unique, waitUntil, within } from '../helpers/util.mjs'

const { connect } = crosslock
const WOKEN_WITHIN = 20_000

const env = {}
before(async () => {
  env.server = await startRedis()
  env.raw = await RawRedis.connect(env.server.url)
  env.java = await JavaDriver.start()
  await env.java.connect(env.server.url)
  await env.java.ok('kind group')
  env.javaHolder = await env.java.holder()
  env.client = await connect(env.server.url)
})
after(async () => {
  await env.client?.close()
  await env.java?.close()
  await env.raw?.close()
  await env.server?.stop()
})

const word = (v) => encodeURIComponent(v)
const javaName = (group, values) => `${group}/${values.map(word).join(',')}`
const VALUES = ['', 'a', 'héllo', '日本語', '😀', 'y'.repeat(33), 'with space, comma']

test('the same values name the same fields as Redisson (Kryo5Codec)', async () => {
  for (const v of VALUES) {
    const expected = await env.java.ok(v === '' ? 'groupField' : `groupField ${word(v)}`)
    assert.deepEqual(env.client.groupLock('g', [v]).fields, [expected], JSON.stringify(v))
  }
})

test('a Java holder excludes an overlapping set, not a disjoint one, and its release wakes ours', async () => {
  const group = unique('orders')
  await env.java.ok(`lock ${javaName(group, ['1', 'héllo'])}`)
  assert.equal(await env.client.groupLock(group, ['héllo', '3']).tryAcquire(), null)
  const disjoint = await env.client.groupLock(group, ['3'])
  const held = await disjoint.tryAcquire()
  assert.ok(held, 'a disjoint set is free')
  assert.equal(await env.java.ok(`tryLock ${javaName(group, ['3', '4'])}`), 'false')
  await held.release()

  const waiter = background(env.client.groupLock(group, ['1', '2']), { wait: WOKEN_WITHIN })
  await waitUntil(async () => (await env.raw.command('PUBSUB', 'NUMSUB', channelOf(group)))[1] >= 1, 'our waiter to subscribe')
  await env.java.ok(`unlock ${javaName(group, ['1', 'héllo'])}`)
  await within(waiter.promise, WOKEN_WITHIN, 'our waiter to be woken')
  assert.ok(waiter.held, String(waiter.error))
  await waiter.held.release()
})

test('our release wakes a Java waiter', async () => {
  const group = unique('wake')
  const held = await env.client.groupLock(group, ['x']).acquire()
  env.java.send(`tryLockWait ${javaName(group, ['x', 'y'])} ${WOKEN_WITHIN} -1`)
  await waitUntil(async () => (await env.raw.command('PUBSUB', 'NUMSUB', channelOf(group)))[1] >= 1, 'Redisson to subscribe')
  assert.equal(env.java.hasReply(), false)
  await held.release()
  assert.equal(env.java.expectOk(await env.java.reply(WOKEN_WITHIN)), 'true')
  await env.java.ok(`unlock ${javaName(group, ['x', 'y'])}`)
})
