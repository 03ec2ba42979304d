// A worker_thread incrementing a non-atomic GET/SET counter under a lock, with its own client.
// workerData: { url, name, key, rounds }
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

import { RawRedis } from '../helpers/resp.mjs'

const { connect } = createRequire(import.meta.url)('../../')
const { url, name, key, rounds } = workerData
const client = await connect(url)
const raw = await RawRedis.connect(url)
const lock = client.lock(name)
const owners = new Set()
for (let i = 0; i < rounds; i++) {
  await lock.withLock(async (held) => {
    owners.add(held.owner)
    const n = Number((await raw.command('GET', key)) ?? 0)
    await new Promise((resolve) => setImmediate(resolve))
    await raw.command('SET', key, n + 1)
  })
}
parentPort.postMessage({ id: client.id, owners: [...owners] })
await raw.close()
await client.close()
