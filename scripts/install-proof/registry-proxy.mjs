#!/usr/bin/env node
// The install proof's HTTPS proxy (its own process, so that the proof's synchronous npm and n8n
// calls cannot stall it): answers for registry.npmjs.org from the local Verdaccio, over CONNECT
// with TLS (a certificate of the proof's throwaway CA) or as an absolute-URI request, and refuses
// every other host, writing each refused host to `refused.log` beside the certificate.
// Usage: node registry-proxy.mjs <listen port> <verdaccio port> <key.pem> <cert.pem>
import http from 'node:http'
import tls from 'node:tls'
import { readFileSync, appendFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

const [listenPort, registryPort, keyFile, certFile] = process.argv.slice(2)
const refusedLog = join(dirname(certFile), 'refused.log')
const key = readFileSync(keyFile)
const cert = readFileSync(certFile)

function forward(req, res) {
  const url = new URL(req.url, 'https://registry.npmjs.org')
  const up = http.request(
    {
      host: '127.0.0.1',
      port: Number(registryPort),
      method: req.method,
      path: url.pathname + url.search,
      headers: { ...req.headers, host: 'registry.npmjs.org', 'x-forwarded-proto': 'https' },
    },
    (r) => {
      res.writeHead(r.statusCode, r.headers)
      r.pipe(res)
    },
  )
  up.on('error', (e) => res.destroy(e))
  req.pipe(up)
}

const refuse = (what) => appendFileSync(refusedLog, what + '\n')
const inner = http.createServer(forward)
const server = http.createServer((req, res) => {
  if (/^https?:\/\/registry\.npmjs\.org(:\d+)?\//.test(req.url)) return forward(req, res)
  refuse(req.url)
  res.writeHead(403).end('install proof: only registry.npmjs.org is served here')
})
server.on('connect', (req, socket) => {
  socket.on('error', () => {})
  if (req.url !== 'registry.npmjs.org:443') {
    refuse(req.url)
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n')
    return
  }
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const t = new tls.TLSSocket(socket, { isServer: true, key, cert })
  t.on('error', () => {})
  inner.emit('connection', t)
})
server.listen(Number(listenPort), '127.0.0.1', () => console.log('listening'))
