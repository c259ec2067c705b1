// registry.npmjs.org as the install proofs' n8n sees it: n8n 2.x always passes
// --registry=https://registry.npmjs.org to npm (another registry needs an enterprise licence), so an npm
// config cannot redirect it. HTTPS_PROXY points at a loopback proxy (./registry-proxy.mjs, its own process)
// that answers for registry.npmjs.org only, with TLS from a throwaway CA (given to n8n and npm by
// NODE_EXTRA_CA_CERTS), forwarding to the local Verdaccio, and refuses every other host.
import { spawn } from 'node:child_process'
import { mkdirSync, writeFileSync, existsSync, readFileSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from './verdaccio.mjs'

const proxyScript = join(dirname(fileURLToPath(import.meta.url)), 'registry-proxy.mjs')

/** The throwaway CA and registry.npmjs.org's certificate, in `dir` (made), by openssl through `sh`. */
export function makeCertificates(dir, sh) {
  mkdirSync(dir)
  const o = (args) => {
    const r = sh('openssl', args, { cwd: dir })
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`)
  }
  o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=flowguard install proof CA'])
  o(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'reg.key', '-out', 'reg.csr', '-subj', '/CN=registry.npmjs.org'])
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:registry.npmjs.org\nextendedKeyUsage=serverAuth\n')
  o(['x509', '-req', '-in', 'reg.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'reg.pem', '-days', '2', '-extfile', 'san.ext'])
  return { ca: join(dir, 'ca.pem'), keyFile: join(dir, 'reg.key'), certFile: join(dir, 'reg.pem') }
}

/** Starts the proxy for `registry` (startVerdaccio's) with `certs` (makeCertificates'). */
export async function startProxy(registry, certs) {
  const port = await freePort()
  const proc = spawn(process.execPath, [proxyScript, String(port), String(registry.port), certs.keyFile, certs.certFile], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    proc.stdout.once('data', resolve)
    proc.once('exit', () => reject(new Error('the registry proxy exited')))
  })
  const refusedLog = join(dirname(certs.certFile), 'refused.log')
  return {
    url: `http://127.0.0.1:${port}`,
    refused: () => (existsSync(refusedLog) ? readFileSync(refusedLog, 'utf8').split('\n').filter(Boolean) : []),
    stop: () => proc.kill('SIGTERM'),
  }
}
