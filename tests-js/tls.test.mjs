// rediss:// with a private CA: connect(url, { tlsCaCert }) against a TLS-only redis-server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { REDIS_CLI, REDIS_SERVER, freePort, killedWithUs } from './helpers/redis-server.mjs'
import { crosslock, waitUntil } from './helpers/util.mjs'

async function startTlsRedis (t) {
  const dir = mkdtempSync(join(tmpdir(), 'crosslock-tls-'))
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=crosslock test CA',
    '-keyout', 'ca-key.pem', '-out', 'ca.pem')
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'key.pem', '-out', 'server.csr')
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n')
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial',
    '-days', '1', '-extfile', 'san.ext', '-out', 'cert.pem')
  const port = await freePort()
  const child = spawn(REDIS_SERVER, ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
    '--tls-cert-file', 'cert.pem', '--tls-key-file', 'key.pem', '--tls-auth-clients', 'no',
    '--save', '', '--appendonly', 'no', '--dir', dir], { cwd: dir, stdio: 'ignore' })
  killedWithUs(child, dir)
  t.after(() => { child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) })
  await waitUntil(() => {
    try {
      return execFileSync(REDIS_CLI, ['--tls', '--cacert', 'ca.pem', '-p', String(port), 'ping'], { cwd: dir }).toString().trim() === 'PONG'
    } catch { return false }
  }, 'the TLS redis-server to start')
  return { url: `rediss://127.0.0.1:${port}/0`, ca: readFileSync(join(dir, 'ca.pem')) }
}

test('a lock over TLS with a private CA (Buffer and string)', async (t) => {
  const { url, ca } = await startTlsRedis(t)
  for (const tlsCaCert of [ca, ca.toString('utf8')]) {
    const client = await crosslock.connect(url, { tlsCaCert })
    try {
      const lock = client.lock('tls:orders')
      const held = await lock.acquire()
      assert.equal(await lock.holdCount({ owner: held.owner }), 1)
      await held.release()
      assert.equal(await lock.isLocked(), false)
    } finally {
      await client.close()
    }
  }
})

test('an untrusted server certificate is refused with UNAVAILABLE', async (t) => {
  const { url } = await startTlsRedis(t)
  await assert.rejects(crosslock.connect(url, { connectTimeout: 1000 }), (e) => e.code === 'UNAVAILABLE' && /\(TLS\)/.test(e.message))
})

test('tlsCaCert of the wrong type is an invalid argument', async () => {
  await assert.rejects(crosslock.connect('rediss://127.0.0.1:1/0', { tlsCaCert: 42 }), (e) => e.code === 'INVALID_ARGUMENT' && e instanceof TypeError)
})
