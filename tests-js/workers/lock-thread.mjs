// A worker_thread that holds or waits for a lock until it is terminated.
// workerData: { url, name, mode: 'hold' | 'wait' }
// Posts { id, holder } once it holds the lock ('hold'), { id, waiting: true } once its acquire is
// under way ('wait'), and { acquired } if a 'wait' acquire ever succeeds.
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const { connect } = createRequire(import.meta.url)('../../')
const { url, name, mode } = workerData
const client = await connect(url)
const lock = client.lock(name)
if (mode === 'hold') {
  const held = await lock.acquire({ lease: 60_000 })
  parentPort.postMessage({ id: client.id, holder: held.holder })
} else {
  const pending = lock.acquire()
  parentPort.postMessage({ id: client.id, waiting: true })
  const held = await pending
  parentPort.postMessage({ id: client.id, acquired: held.holder })
}
setInterval(() => {}, 1 << 30)
