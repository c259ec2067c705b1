// TLS to PostgreSQL per libpq's sslmode, against a real server: a throwaway cluster of this
// suite's own with ssl=on, a throwaway CA and server certificate (localhost, 127.0.0.1), and a
// pg_hba.conf that takes TCP connections over TLS only (scripts/postgres.mjs --tls), so every
// connection that works here is encrypted. Skipped where PostgreSQL or openssl is not installed.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { postgresBin, startPostgres } from '../scripts/postgres.mjs'
import { Flowguard, freshPrefix, rejection } from './backends.mjs'
import { haveOpenssl, makeCerts, makeClientCert } from './tls-certs.mjs'

const skip = !postgresBin() ? 'PostgreSQL is not installed' : !haveOpenssl ? 'openssl is not installed' : false
const SECRET = 'hunter2-tls'

describe('PostgreSQL over TLS (sslmode)', { skip }, () => {
  let cluster
  let otherDir
  let wrongCa
  // A password in every URL (trust authentication ignores it): no message may show it.
  const url = (query) => `postgres://flowguard:${SECRET}@127.0.0.1:${cluster.port}/postgres${query}`
  // The key=value form with a host name the certificate does not name, reached at 127.0.0.1.
  const misnamed = (mode, ca) =>
    `host=flowguard.invalid hostaddr=127.0.0.1 port=${cluster.port} user=flowguard password=${SECRET} dbname=postgres sslmode=${mode} sslrootcert='${ca}'`
  const open = (postgres) => Flowguard.open({ postgres, prefix: freshPrefix('pgtls'), connectTimeoutMs: 3000 })
  /** Opens, takes and releases a lock (a round trip over the connection), closes. */
  const works = async (postgres) => {
    const fg = await open(postgres)
    const lock = await fg.acquireLock('tls')
    assert.equal(lock.acquired, true)
    assert.deepEqual(await fg.releaseLock('tls', lock.owner), { released: true })
    await fg.close()
  }
  const fails = async (postgres, code, pattern) => {
    const e = await rejection(open(postgres))
    assert.equal(e.code, code, e.message)
    if (pattern) assert.match(e.message, pattern)
    assert.doesNotMatch(`${e.message} ${e.stack}`, new RegExp(SECRET))
    return e
  }

  before(async () => {
    cluster = await startPostgres({ tls: true })
    otherDir = mkdtempSync(join(tmpdir(), 'flowguard-pgtls-'))
    wrongCa = makeCerts(otherDir).ca
  })
  after(() => {
    cluster?.stop()
    if (otherDir) rmSync(otherDir, { recursive: true, force: true })
  })

  test('verify-full with the right CA connects (sslrootcert file, or tls.ca PEM text)', async () => {
    await works(url(`?sslmode=verify-full&sslrootcert=${encodeURIComponent(cluster.ca)}`))
    await works({ url: url('?sslmode=verify-full'), tls: { ca: readFileSync(cluster.ca, 'utf8') } })
    // tls given without sslmode: verify-full.
    await works({ url: url(''), tls: { ca: readFileSync(cluster.ca, 'utf8') } })
  })

  test('a wrong CA fails with ERR_BACKEND_UNAVAILABLE naming the certificate, no secret', async () => {
    await fails(url(`?sslmode=verify-full&sslrootcert=${encodeURIComponent(wrongCa)}`), 'ERR_BACKEND_UNAVAILABLE', /TLS|certificate/i)
    await fails({ url: url(''), tls: { ca: readFileSync(wrongCa, 'utf8') } }, 'ERR_BACKEND_UNAVAILABLE', /certificate/i)
    // With a CA, require checks the chain as libpq does (verify-ca).
    await fails(url(`?sslmode=require&sslrootcert=${encodeURIComponent(wrongCa)}`), 'ERR_BACKEND_UNAVAILABLE', /certificate/i)
    // The system's trust store does not hold the throwaway CA.
    await fails(url('?sslmode=verify-full'), 'ERR_BACKEND_UNAVAILABLE')
  })

  test('require encrypts without checking the certificate; prefer (the default) uses TLS when offered', async () => {
    await works(url('?sslmode=require'))
    await works(url('?sslmode=prefer'))
    await works(url(''))
  })

  test('verify-ca checks the chain but not the name; verify-full checks both', async () => {
    await works(misnamed('verify-ca', cluster.ca))
    await fails(misnamed('verify-full', cluster.ca), 'ERR_BACKEND_UNAVAILABLE', /certificate/i)
    await fails(misnamed('verify-ca', wrongCa), 'ERR_BACKEND_UNAVAILABLE', /certificate/i)
  })

  test('disable against a TLS-only server (hostssl) is refused by the server: ERR_BACKEND_AUTH', async () => {
    await fails(url('?sslmode=disable'), 'ERR_BACKEND_AUTH', /pg_hba/)
  })

  test('a client certificate signs in where the server asks for one (cert authentication): sslcert/sslkey files or tls.cert/tls.key PEM text', async () => {
    const mine = makeClientCert(cluster.certs, 'flowguard_cert', 'client-ok')
    const certUrl = (query) => `postgres://flowguard_cert@127.0.0.1:${cluster.port}/postgres${query}`
    const files = `&sslcert=${encodeURIComponent(mine.cert)}&sslkey=${encodeURIComponent(mine.key)}`
    await works(certUrl(`?sslmode=verify-full&sslrootcert=${encodeURIComponent(cluster.ca)}${files}`))
    await works(certUrl(`?sslmode=require${files}`))
    const pem = { cert: readFileSync(mine.cert, 'utf8'), key: readFileSync(mine.key, 'utf8') }
    await works({ url: certUrl(''), tls: { ca: readFileSync(cluster.ca, 'utf8'), ...pem } })
    // Without a certificate the server refuses the role: an authentication error, coded.
    await fails(certUrl('?sslmode=require'), 'ERR_BACKEND_AUTH')
    // A certificate for another role (its common name) is refused too.
    const other = makeClientCert(cluster.certs, 'someone_else', 'client-other')
    await fails(
      { url: certUrl('?sslmode=require'), tls: { cert: readFileSync(other.cert, 'utf8'), key: readFileSync(other.key, 'utf8') } },
      'ERR_BACKEND_AUTH',
    )
    // A certificate signed by a CA the server does not trust: the server ends the handshake.
    const stranger = makeClientCert(otherDir, 'flowguard_cert', 'client-stranger')
    const e = await rejection(open({ url: certUrl('?sslmode=require'), tls: { cert: readFileSync(stranger.cert, 'utf8'), key: readFileSync(stranger.key, 'utf8') } }))
    assert.ok(['ERR_BACKEND_AUTH', 'ERR_BACKEND_UNAVAILABLE'].includes(e.code), `${e.code}: ${e.message}`)
  })

  test('a client certificate without its key, with the wrong key, or given twice is refused by field before connecting; the key never shown', async () => {
    const mine = makeClientCert(cluster.certs, 'flowguard_cert', 'client-checks')
    const other = makeClientCert(cluster.certs, 'flowguard_cert', 'client-checks2')
    const cert = readFileSync(mine.cert, 'utf8')
    const key = readFileSync(mine.key, 'utf8')
    const keyBody = key.split('\n')[1]
    const check = async (postgres, field, pattern) => {
      const e = await fails(postgres, 'ERR_INVALID_ARGUMENT', pattern)
      assert.equal(e.field, field, e.message)
      assert.doesNotMatch(`${e.message} ${e.stack}`, new RegExp(keyBody.slice(0, 40).replace(/[+/]/g, '.')))
    }
    await check({ url: url(''), tls: { cert } }, 'postgres.tls.key', /needs its key/)
    await check({ url: url(''), tls: { key } }, 'postgres.tls.cert', /needs its certificate/)
    await check(url(`?sslcert=${encodeURIComponent(mine.cert)}`), 'postgres.tls.key', /needs its key/)
    await check({ url: url(''), tls: { cert, key: readFileSync(other.key, 'utf8') } }, 'postgres.tls.key', /cannot be used together/)
    await check({ url: url(''), tls: { cert: 'not a certificate', key } }, 'postgres.tls.cert', /PEM certificate/)
    await check({ url: url(''), tls: { cert, key: 'not a key' } }, 'postgres.tls.key', /PEM private key/)
    await check({ url: url(`?sslcert=${encodeURIComponent(mine.cert)}&sslkey=${encodeURIComponent(mine.key)}`), tls: { cert, key } }, 'postgres.tls.cert', /sslcert in postgres.url/)
    await check(url(`?sslcert=${encodeURIComponent(mine.cert)}&sslkey=%2Fnonexistent%2Fme.key`), 'postgres.url', /sslkey="\/nonexistent\/me.key", which cannot be read/)
  })

  test('bad TLS settings are refused by field before connecting', async () => {
    let e = await fails(url('?sslmode=allow'), 'ERR_INVALID_ARGUMENT', /postgres\.url/)
    e = await fails(url('?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem'), 'ERR_INVALID_ARGUMENT', /sslrootcert/)
    e = await fails({ url: url(''), tls: { ca: 'not a certificate' } }, 'ERR_INVALID_ARGUMENT', /postgres\.tls\.ca/)
    e = await fails(
      { url: url(`?sslrootcert=${encodeURIComponent(cluster.ca)}`), tls: { ca: readFileSync(cluster.ca, 'utf8') } },
      'ERR_INVALID_ARGUMENT',
      /postgres\.tls\.ca/,
    )
    e = await fails({ url: url(''), tls: { ca: 'x', verify: true } }, 'ERR_INVALID_ARGUMENT')
    assert.ok(e)
  })
})
