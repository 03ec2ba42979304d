// A Node server taking turns on one lock with a Python process, and a Java Redisson process when
// Java is installed (run by `./dev demo`). Arguments: the Redis URL, the epoch ms to start at.
import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'

const { connect } = createRequire(import.meta.url)('../')
const url = process.argv[2] ?? 'redis://127.0.0.1:6379/0'
const client = await connect(url)
const lock = client.lock('demo:orders')
await sleep(Math.max(0, Number(process.argv[3] ?? 0) - Date.now()))

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
  await sleep(400) // out for longer than one hold: the others take their turns
}
await client.close()
