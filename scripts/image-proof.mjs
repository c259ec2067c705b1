#!/usr/bin/env node
// The image proof: crates/server/Containerfile built and run with podman, as an operator would run it.
// Input: FLOWGUARD_STATIC_SERVER_BIN, a static (musl) flowguard-server. Builds the FROM scratch image from a
// context holding only that binary (--format docker, which keeps the HEALTHCHECK), then runs it with the
// durable store on a named volume and the token from the environment. Checks: the binary is static, /healthz
// answers, the image's own HEALTHCHECK passes (`podman healthcheck run`), a lock taken over HTTP is refused
// with 409 to another owner, the server runs as a non-root user, the token never appears in its logs,
// `podman stop` (SIGTERM) ends it within the grace period with exit status 0, and a new container on the
// same volume still has the lock held and a state value written before. Prints the image and binary sizes,
// and removes every container, volume and image it made.
//
// Environment: FLOWGUARD_STATIC_SERVER_BIN (required), FLOWGUARD_PODMAN (default `podman`). podman runs with
// its own containers.conf (no default ulimits: a container in a container may not raise them), the cgroupfs
// cgroup manager where systemd is not running, and /usr/sbin/runc when present; the containers share the host's
// network.
// Prints one line per check and closes with "image-proof: N passed, M failed".
import { spawnSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, writeFileSync, copyFileSync, chmodSync, existsSync, statSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { proofReport, sleep } from './proof-report.mjs'
import { freePort } from './install-proof/verdaccio.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const containerfile = join(root, 'crates', 'server', 'Containerfile')
const report = proofReport('image-proof')
const { check, figures } = report
const tmp = mkdtempSync(join(tmpdir(), 'flowguard-image-proof-'))
const conf = join(tmp, 'containers.conf')
writeFileSync(conf, '[containers]\ndefault_ulimits = []\n')
const podmanBin = process.env.FLOWGUARD_PODMAN || 'podman'
// Without systemd (a container, this kind of CI machine) podman manages cgroups itself.
const globalArgs = [...(existsSync('/run/systemd/system') ? [] : ['--cgroup-manager=cgroupfs']), ...(existsSync('/usr/sbin/runc') ? ['--runtime', '/usr/sbin/runc'] : [])]
const token = randomBytes(24).toString('hex')
const podmanEnv = { ...process.env, CONTAINERS_CONF: conf, FLOWGUARD_TOKEN: token }
function podman(args, opts = {}) {
  const r = spawnSync(podmanBin, [...globalArgs, ...args], { encoding: 'utf8', env: podmanEnv, maxBuffer: 1 << 26, ...opts })
  return { status: r.status, out: (r.stdout ?? '').trim(), err: (r.stderr ?? '').trim() || (r.error?.message ?? '') }
}

const id = randomBytes(4).toString('hex')
const image = `localhost/flowguard-server-proof:${id}`
const volume = `flowguard-proof-${id}`
const containers = []

/** Runs the image (detached) with the durable store on the volume, listening on `port` of the host's network. */
function runContainer(name, port) {
  containers.push(name)
  return podman([
    'run', '-d', '--name', name, '--network', 'host',
    '-v', `${volume}:/data`,
    '-e', `FLOWGUARD_LISTEN=127.0.0.1:${port}`,
    '-e', 'FLOWGUARD_PATH=/data/flowguard.db',
    // The token's value comes from podman's environment: not on any command line.
    '-e', 'FLOWGUARD_TOKEN',
    image,
  ])
}

async function waitHealthy(base, name, timeoutMs = 20_000) {
  const t0 = Date.now()
  while (Date.now() - t0 < timeoutMs) {
    if (await fetch(`${base}/healthz`).then((r) => r.ok, () => false)) return Date.now() - t0
    const state = podman(['inspect', '--format', '{{.State.Running}}', name]).out
    if (state === 'false') return -1
    await sleep(50)
  }
  return -1
}

async function call(base, path, body) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  })
  return { status: res.status, json: await res.json().catch(() => undefined) }
}

/** `podman stop -t grace`: the time it took and the exit status the container ended with. */
function stopTimed(name, grace) {
  const t0 = Date.now()
  const r = podman(['stop', '-t', String(grace), name])
  const secs = (Date.now() - t0) / 1000
  const exit = podman(['inspect', '--format', '{{.State.ExitCode}}', name]).out
  return { ok: r.status === 0, secs, exit, err: r.err }
}

async function main() {
  const t0 = Date.now()
  const bin = process.env.FLOWGUARD_STATIC_SERVER_BIN
  if (!check(`FLOWGUARD_STATIC_SERVER_BIN names a file (${bin})`, bin && existsSync(bin), 'set FLOWGUARD_STATIC_SERVER_BIN to a static flowguard-server (scripts/musl/)')) return
  const version = podman(['--version'])
  if (!check(`podman is installed (${version.out})`, version.status === 0, `${version.err}: apt-get install -y podman runc`)) return
  const interp = spawnSync('readelf', ['-l', bin], { encoding: 'utf8' })
  check('the binary is static: no program interpreter (readelf -l)', interp.status === 0 && !/INTERP/.test(interp.stdout), interp.stderr || 'it has an INTERP header: it needs a loader the scratch image does not hold')
  figures.push(`binary: ${(statSync(bin).size / 1e6).toFixed(1)} MB (${bin})`)

  // The build context: the binary alone.
  const ctx = join(tmp, 'context')
  mkdirSync(ctx)
  copyFileSync(bin, join(ctx, 'flowguard-server'))
  chmodSync(join(ctx, 'flowguard-server'), 0o755)
  const tb = Date.now()
  const build = podman(['build', '--format', 'docker', '-f', containerfile, '-t', image, ctx])
  figures.push(`podman build took ${((Date.now() - tb) / 1000).toFixed(1)} s`)
  if (!check(`podman build -f crates/server/Containerfile (FROM scratch) -> ${image}`, build.status === 0, build.err.slice(-1500))) return
  const size = Number(podman(['image', 'inspect', '--format', '{{.Size}}', image]).out)
  figures.push(`image: ${(size / 1e6).toFixed(1)} MB`)
  // podman keeps the HEALTHCHECK beside the OCI config (`Healthcheck`), the rest in `Config`.
  const inspected = JSON.parse(podman(['image', 'inspect', image]).out || '[{}]')[0]
  const cfg = inspected.Config ?? {}
  const healthcheck = (inspected.Healthcheck ?? cfg.Healthcheck)?.Test
  check(`the image keeps its HEALTHCHECK (${JSON.stringify(healthcheck)}), a numeric non-root USER (${cfg.User}) and a VOLUME /data`,
    JSON.stringify(healthcheck) === JSON.stringify(['CMD', '/flowguard-server', '--healthcheck']) && /^[1-9]\d*(:\d+)?$/.test(cfg.User ?? '') && Object.keys(cfg.Volumes ?? {}).includes('/data'),
    JSON.stringify(inspected).slice(0, 1500))

  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const first = `flowguard-proof-${id}-a`
  const run = runContainer(first, port)
  if (!check('podman run: durable store on a named volume, token from the environment', run.status === 0, run.err)) return
  const up = await waitHealthy(base, first)
  figures.push(`first start: /healthz answered after ${up} ms`)
  if (!check('/healthz answers', up >= 0, podman(['logs', first]).err)) return
  // `podman healthcheck run` runs the image's HEALTHCHECK command now (without systemd, podman has no timer
  // to run it by itself: it says so on stderr) and records the result in the container's state.
  const hc = podman(['healthcheck', 'run', first])
  const state = JSON.parse(podman(['inspect', '--format', '{{json .State}}', first]).out || '{}')
  const health = state.Health ?? state.Healthcheck ?? {}
  check(`the image's HEALTHCHECK passes (podman healthcheck run: exit ${hc.status}, status "${health.Status}")`, hc.status === 0 && health.Status === 'healthy', `${hc.status} ${hc.out} ${hc.err} ${JSON.stringify(health).slice(0, 600)}`)

  const pid = podman(['inspect', '--format', '{{.State.Pid}}', first]).out
  const uid = existsSync(`/proc/${pid}/status`) ? (readFileSync(`/proc/${pid}/status`, 'utf8').match(/^Uid:\s+(\d+)/m) ?? [])[1] : undefined
  check(`the server process runs as a non-root user (uid ${uid})`, uid !== undefined && uid !== '0', `pid ${pid}`)

  const unauth = await fetch(`${base}/v1/lock/get`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"nightly"}' })
  check('a call without the token is refused with 401', unauth.status === 401, unauth.status)
  const a = await call(base, '/v1/lock/acquire', { name: 'nightly', timeoutMs: 600000, waitMs: 0, label: 'image-proof' })
  check('a lock is acquired over HTTP (200, with an owner and fence)', a.status === 200 && a.json?.owner && a.json?.fence, JSON.stringify(a))
  const b = await call(base, '/v1/lock/acquire', { name: 'nightly', waitMs: 0 })
  check('another owner is refused with 409 ERR_LOCK_HELD', b.status === 409 && b.json?.code === 'ERR_LOCK_HELD', JSON.stringify(b))
  const s = await call(base, '/v1/state/set', { key: 'proof', value: { run: id } })
  check('a state value is written', s.status === 200 && s.json?.written === true, JSON.stringify(s))

  // A call in flight at the stop: `podman stop` sends SIGTERM; the server answers it, then exits.
  const grace = 10
  const waiting = call(base, '/v1/lock/acquire', { name: 'nightly', waitMs: 1500 }).catch((e) => ({ status: e.message }))
  await sleep(200)
  const stop = stopTimed(first, grace)
  const inflight = await waiting
  figures.push(`podman stop -t ${grace} (SIGTERM, a call in flight) took ${stop.secs.toFixed(2)} s`)
  check(`SIGTERM (podman stop -t ${grace}) ends it within the grace period (${stop.secs.toFixed(2)} s) with exit status 0 (${stop.exit})`, stop.ok && stop.secs < grace && stop.exit === '0', stop.err)
  check(`the call in flight at the stop was answered (${inflight.status})`, inflight.status === 409, JSON.stringify(inflight))
  const logs = podman(['logs', first])
  check('the container logged (its first line) and the token is in none of its logs', (logs.out + logs.err).length > 0 && !(logs.out + logs.err).includes(token), 'the token appears in `podman logs`')

  // A new container on the same volume: the durable store kept the state.
  const port2 = await freePort()
  const base2 = `http://127.0.0.1:${port2}`
  const second = `flowguard-proof-${id}-b`
  const run2 = runContainer(second, port2)
  const up2 = run2.status === 0 ? await waitHealthy(base2, second) : -1
  figures.push(`restart on the volume: /healthz answered after ${up2} ms`)
  if (!check('a new container on the same volume starts', up2 >= 0, run2.err + podman(['logs', second]).err)) return
  const held = await call(base2, '/v1/lock/get', { name: 'nightly' })
  check('after the restart the lock is still held, with the same fence and holder', held.status === 200 && held.json?.locked === true && held.json?.fence === a.json?.fence && held.json?.holder === 'image-proof', JSON.stringify(held))
  const c = await call(base2, '/v1/lock/acquire', { name: 'nightly', waitMs: 0 })
  check('after the restart another owner is still refused with 409', c.status === 409 && c.json?.code === 'ERR_LOCK_HELD', JSON.stringify(c))
  const r = await call(base2, '/v1/lock/release', { name: 'nightly', owner: a.json?.owner })
  check('after the restart the first owner releases its lock', r.status === 200 && r.json?.released === true, JSON.stringify(r))
  const g = await call(base2, '/v1/state/get', { key: 'proof' })
  check('after the restart the state value is still there', g.status === 200 && g.json?.found === true && g.json?.value?.run === id, JSON.stringify(g))
  const stop2 = stopTimed(second, grace)
  check(`the second container stops on SIGTERM too (${stop2.secs.toFixed(2)} s, exit status ${stop2.exit})`, stop2.ok && stop2.secs < grace && stop2.exit === '0', stop2.err)
  figures.push(`image-proof: took ${((Date.now() - t0) / 1000).toFixed(1)} s in total`)
}

try {
  await main()
} catch (e) {
  check('image proof ran to the end', false, e.stack)
} finally {
  for (const c of containers) podman(['rm', '-f', '-v', '-t', '0', c])
  podman(['volume', 'rm', '-f', volume])
  podman(['rmi', '-f', image])
  const left = podman(['ps', '-a', '--filter', `name=flowguard-proof-${id}`, '--format', '{{.Names}}']).out + podman(['volume', 'ls', '--filter', `name=${volume}`, '--format', '{{.Name}}']).out
  check('every container, volume and image the proof made is removed', left === '' && podman(['image', 'exists', image]).status !== 0, left)
  rmSync(tmp, { recursive: true, force: true })
}
process.exit(report.finish())
