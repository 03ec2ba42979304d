// A crosslock client's lock metrics served to Prometheus: connect(url, { metrics: provider }) with
// an OpenTelemetry SDK MeterProvider (@opentelemetry/sdk-metrics) whose reader is the OpenTelemetry
// Prometheus exporter (@opentelemetry/exporter-prometheus), served on GET /metrics by node:http.
//
// Usage: node examples/prometheus_metrics.mjs [REDIS_URL] [PORT] (or the environment's REDIS_URL
// and METRICS_PORT; defaults redis://127.0.0.1:6379/0 and 9464, port 0 picks a free one). It prints
// the address it serves on, does a few lock operations (an uncontended acquire and release, a wait
// that times out, a contended acquire), prints `done`, and serves until stopped (Ctrl-C, SIGTERM).
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'

import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'

// The package of this checkout (an application writes `require('crosslock')`).
const { connect, LockTimeoutError } = createRequire(import.meta.url)('../')

const url = process.argv[2] ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0'
const port = Number(process.argv[3] ?? process.env.METRICS_PORT ?? 9464)

// The exporter is the provider's reader; its request handler serves what it reads, here on a
// server of our own (bound to loopback, any port).
const exporter = new PrometheusExporter({ preventServerStart: true })
// This exporter, unlike Python's and Rust's, does not add the unit to a name: views add `seconds` to
// the instruments measured in s, so that one dashboard (examples/grafana) reads all three languages'
// crosslock_lock_wait_duration_seconds, and so on.
const SECONDS = ['crosslock.lock.wait.duration', 'crosslock.lock.hold.duration', 'crosslock.watchdog.renewal.duration']
const views = SECONDS.map((name) => ({ instrumentName: name, name: `${name}.seconds` }))
const provider = new MeterProvider({ readers: [exporter], views })
const server = createServer((request, response) => exporter.getMetricsRequestHandler(request, response))
await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve))
console.log(`serving metrics on http://127.0.0.1:${server.address().port}/metrics`)

const ours = await connect(url, { metrics: provider })
const theirs = await connect(url)
const lock = ours.lock('example:orders')

// Uncontended: taken at once, given back.
await (await lock.acquire()).release()

// Another client holds it and gives it back 300 ms after our wait of 100 ms timed out: that next
// wait is contended, woken by the release's message.
const held = await theirs.lock('example:orders').acquire()
await lock.acquire({ wait: 100 }).then(
  () => { throw new Error('acquired a lock another client holds') },
  (e) => { if (!(e instanceof LockTimeoutError)) throw e },
)
const contended = lock.acquire({ wait: 10_000 })
await sleep(300)
await held.release()
await (await contended).release()

await theirs.close()
await ours.close() // every measurement is recorded before close resolves
console.log('done: 1 uncontended acquire, 1 wait timed out, 1 contended acquire')

// Serves until stopped.
const stop = async () => {
  server.close()
  await provider.shutdown()
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
