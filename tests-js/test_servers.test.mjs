// The suites' own redis-servers never outlive the process that started them, however it ends.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { canConnect } from './helpers/redis-server.mjs'
import { waitUntil } from './helpers/util.mjs'

const helper = new URL('./helpers/redis-server.mjs', import.meta.url).href

for (const signal of ['SIGKILL', 'SIGTERM']) {
  test(`a test process ended by ${signal} leaves no server running`, async () => {
    // SIGKILL runs no handler at all (a CI runner's timeout, kill -9); SIGTERM runs the helper's.
    const program = `
      const { startRedis } = await import(${JSON.stringify(helper)})
      const server = await startRedis()
      console.log(JSON.stringify({ port: server.port, dir: server.dir }))
      process.kill(process.pid, '${signal}')
      await new Promise(() => {})`
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', program], { encoding: 'utf8', timeout: 30_000 })
    assert.equal(child.signal, signal, child.stderr)
    const { port, dir } = JSON.parse(child.stdout)
    await waitUntil(async () => !(await canConnect(port)) && !existsSync(dir), `the server on port ${port} to stop and ${dir} to go`)
  })
}
