// A Node server taking turns on one lock with a Python process (run by `./dev demo`).
import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'

const { connect } = createRequire(import.meta.url)('../')
const url = process.argv[2] ?? 'redis://127.0.0.1:6379/0'
const client = await connect(url)
const lock = client.lock('demo:orders')

const stamp = () => new Date().toISOString().slice(11, 23)
for (let turn = 0; turn < 3; turn++) {
  const asked = performance.now()
  const held = await lock.acquire()
  try {
    const waited = performance.now() - asked
    console.log(`${stamp()}  node   (pid ${process.pid}) holds demo:orders as ${client.id}:${held.owner}  (waited ${waited.toFixed(0)} ms)`)
    await sleep(300)
  } finally {
    await held.release()
  }
  await sleep(50) // let the other side in
}
await client.close()
