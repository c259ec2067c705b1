// A certificate authority and a server certificate for localhost / 127.0.0.1 made for a test with
// openssl, valid 2 days: for TLS redis-servers (single and cluster).
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** Whether openssl can be run here. */
export const haveOpenssl = spawnSync('openssl', ['version']).status === 0

/** Writes ca.pem, server.pem and server.key into `dir`; resolves to their paths. */
export function makeCerts(dir) {
  const sh = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`)
  }
  sh(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=flowguard test CA', '-keyout', 'ca.key', '-out', 'ca.pem'])
  sh(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr'])
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  sh(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.pem'])
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key') }
}

/** Writes `<name>.pem` and `<name>.key` into `dir` (where makeCerts wrote ca.pem and ca.key): a
 * client certificate with common name `cn`, signed by that CA; resolves to their paths. */
export function makeClientCert(dir, cn, name = 'client') {
  const sh = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`)
  }
  sh(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`])
  // An X.509 v3 certificate (extensions make it one; rustls refuses v1 certificates).
  writeFileSync(join(dir, `${name}.cnf`), 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n')
  sh(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${name}.cnf`, '-out', `${name}.pem`])
  return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }
}
