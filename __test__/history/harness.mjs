// The parent of a checked history: forks N client processes (worker.mjs), starts them together
// with a barrier (each says ready, then all are told to go with one shared deadline), injects the
// faults of the run while they work, replaces killed clients, and afterwards reads every
// client's JSONL file into one history of operations. Finally it reads the end state (counter
// value, items, the queue drained) as operations of a process named `final`, so the checkers
// are pure functions of the history alone.
import { fork } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { recorder, now } from './record.mjs'
import { SHAPE } from './workloads.mjs'
import { fencedRegister } from './fenced-register.mjs'
import { forgetKilled } from '../faketime.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Runs one history. `env`: the backend's environment for the workers (FG_PATH or REDIS_URL) and
 * FG_PREFIX; `open()`: a client of the same backend for the final reads; `clients`: how many
 * processes; `durationMs`; `leaseMs`; `faults`: { pause: bool, kill: bool, restart: async fn or
 * undefined (kills and restarts the backend), network: a fault-proxy.mjs proxy the clients reach the
 * backend through (latency, black hole or reset in turn), networkMs: [shortest, longest] latency or
 * black hole (default half a lease to two leases), gapMs: the mean time between two faults
 * (default leaseMs) }; `plantedBugs`: run the broken wrapper; `clientEnv(n)`: more environment for
 * the n-th client process started (0, 1, …, replacements included), e.g. a skewed clock.
 * Resolves to { history, stats } (stats: what the nemesis did).
 */
export async function runHistory({ env, open, clients = 4, durationMs = 3000, leaseMs = 300, faults = {}, plantedBugs = false, clientEnv = () => ({}) }) {
  const dir = mkdtempSync(join(tmpdir(), 'fg-history-'))
  const stats = { pauses: 0, kills: 0, restarts: 0, network: 0, clients: 0 }
  const register = fencedRegister()
  const live = new Map() // child -> client name
  const exits = []
  const failures = []
  let next = 0
  const start = () => {
    const n = next++
    const client = `c${n}`
    stats.clients++
    const file = join(dir, `${client}.jsonl`)
    writeFileSync(file, '')
    const own = clientEnv(n)
    const child = fork(join(here, 'worker.mjs'), [], {
      env: { ...process.env, ...env, ...own, HIST_FILE: file, CLIENT: client, LEASE_MS: String(leaseMs), FG_PLANTED_BUGS: plantedBugs ? '1' : '' },
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    })
    let err = ''
    child.stderr.on('data', (d) => (err += d))
    // The lock-set's fenced register (fenced-register.mjs), kept here.
    child.on('message', (m) => {
      // (A callback: a reply to a client killed meanwhile fails there, not as an uncaught EPIPE.)
      if (m?.register !== undefined && child.connected) child.send({ register: m.register, reply: register.handle(m) }, () => {})
    })
    live.set(child, client)
    const ready = new Promise((r) => child.once('message', r))
    exits.push(new Promise((r) => child.on('exit', (code, sig) => {
      live.delete(child)
      if (sig === 'SIGKILL' && own.FAKETIME) forgetKilled(child.pid)
      // 13: its top-level await never settled (a call that neither resolved nor rejected).
      if (code !== 0 && sig !== 'SIGKILL') failures.push(`client ${client} exited ${code ?? sig}: ${err}`)
      r()
    })))
    return { child, ready }
  }

  let deadline
  try {
    // The barrier: every client opened its store and said ready; then one `go` to all.
    const first = Array.from({ length: clients }, start)
    await Promise.all(first.map((w) => w.ready))
    deadline = now() + durationMs
    for (const w of first) w.child.send({ deadline })

    // The nemesis: until the deadline, a fault every gapMs or so on a random client not paused
    // (or the backend), the kinds in turn.
    const kinds = [faults.pause && 'pause', faults.kill && 'kill', faults.restart && 'restart', faults.network && 'network'].filter(Boolean)
    const net = ['latency', 'blackHole', 'reset']
    let k = 0
    const paused = new Map() // child -> its resumption
    while (kinds.length && now() < deadline - leaseMs) {
      await sleep((faults.gapMs ?? leaseMs) * (0.5 + Math.random()))
      const victims = [...live.keys()].filter((c) => !paused.has(c))
      if (!victims.length) continue
      const victim = victims[Math.floor(Math.random() * victims.length)]
      const kind = kinds[k++ % kinds.length]
      if (kind === 'pause') {
        // A GC-like pause longer than any lease: the victim's leases run out while it is stopped.
        // Pauses of different clients may overlap; the nemesis goes on meanwhile.
        stats.pauses++
        victim.kill('SIGSTOP')
        paused.set(victim, sleep(leaseMs * (1.5 + Math.random())).then(() => {
          victim.kill('SIGCONT')
          paused.delete(victim)
        }))
      } else if (kind === 'kill') {
        // Killed mid-call (it always has calls in flight: five loops), then replaced, as a
        // supervisor would.
        stats.kills++
        victim.kill('SIGKILL')
        const w = start()
        w.ready.then(() => w.child.connected && w.child.send({ deadline }))
      } else if (kind === 'network') {
        // Between the clients and the backend, for networkMs: every chunk 50 to 150 ms late,
        // nothing through (calls answered late, or time out past the client's command timeout),
        // or every connection reset.
        const fault = net[stats.network++ % net.length]
        if (fault === 'reset') faults.network.reset()
        else {
          if (fault === 'latency') faults.network.latency(50 + Math.random() * 100)
          else faults.network.blackHole()
          const [shortest, longest] = faults.networkMs ?? [leaseMs / 2, leaseMs * 2]
          await sleep(shortest + Math.random() * (longest - shortest))
          faults.network.heal()
        }
      } else {
        stats.restarts++
        await faults.restart()
      }
    }
    await Promise.all(paused.values())
    // Past the deadline each client finishes its calls in flight and exits; one stuck longer
    // than the command timeout is killed (its open calls become `info`).
    const guard = setTimeout(() => { for (const c of live.keys()) c.kill('SIGKILL') }, 15_000)
    await Promise.all(exits)
    clearTimeout(guard)
  } finally {
    for (const c of live.keys()) { c.kill('SIGCONT'); c.kill('SIGKILL') }
  }
  if (failures.length) throw new Error(`${failures.join('\n')}\n(the clients' histories are kept in ${dir})`)

  // The end state, recorded as operations of process `final`.
  const finalFile = join(dir, 'final.jsonl')
  writeFileSync(finalFile, '')
  const op = recorder(finalFile, 'final')
  const fg = await open()
  await finalReads(fg, op, leaseMs)
  await fg.close?.()

  const history = []
  for (let i = 0; i < next; i++) history.push(...readOps(join(dir, `c${i}.jsonl`)))
  history.push(...readOps(finalFile))
  rmSync(dir, { recursive: true, force: true })
  history.sort((a, b) => a.start - b.start)
  // The fenced register's own order of the writes it applied (no client times: last).
  for (const w of register.log) history.push({ process: 'register', p: 'lockset', f: 'applied', value: w, type: 'ok', start: Infinity, end: Infinity })
  return { history, stats }
}

/** The counter's value, every item's state, and the queue drained: after the visibility timeout of
 * every read, read and ack until nothing is waiting or claimed. */
async function finalReads(fg, op, leaseMs) {
  await op('counter', 'read', {}, async () => ['ok', { value: (await fg.getState(SHAPE.counter)) ?? 0 }])
  for (const id of SHAPE.items) {
    await op('tracker', 'get', { id }, async () => {
      const s = await fg.getItem(SHAPE.group, id)
      return ['ok', { status: s.status, attempts: s.attempts }]
    })
  }
  await sleep(leaseMs * 1.5)
  for (let round = 0; round < 100; round++) {
    const [, size] = await op('queue', 'size', {}, async () => {
      const s = await fg.queueSize(SHAPE.queue)
      return ['ok', { waiting: s.waiting, claimed: s.claimed, again: s.again }]
    })
    if (!size) continue
    if (size.waiting + size.claimed + size.again === 0) return
    const [, b] = await op('queue', 'read', { limit: 1000, visibilityTimeoutMs: 60_000 }, async () => {
      const r = await fg.readBatch(SHAPE.queue, { limit: 1000, visibilityTimeoutMs: 60_000 })
      return ['ok', { owner: r.owner, ids: r.ids }]
    })
    if (b?.ids.length) {
      await op('queue', 'ack', { owner: b.owner, ids: b.ids }, async () => {
        const r = await fg.ack(SHAPE.queue, b.owner, b.ids)
        return ['ok', { items: r.items.map((i) => ({ id: i.id, ok: i.ok, reason: i.reason })) }]
      })
    } else await sleep(50)
  }
}

/** The operations of one client file: each invoke paired with its completion; an invoke without
 * one (the process was killed mid-call) is `info` and never ends (end = Infinity), as Jepsen
 * treats a crashed process's last operation. */
function readOps(file) {
  const open = new Map()
  const ops = []
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    if (!l) continue
    let e
    try { e = JSON.parse(l) } catch { continue } // a line cut by SIGKILL
    if (e.type === 'invoke') {
      const o = { process: e.process, p: e.p, f: e.f, value: e.value, type: 'info', start: e.time, end: Infinity }
      open.set(e.id, o)
      ops.push(o)
    } else {
      const o = open.get(e.id)
      o.type = e.type
      o.result = e.result
      o.error = e.error
      // An `info` may still take effect later (a timed-out call the server runs afterwards).
      o.end = e.type === 'info' ? Infinity : e.time
      o.returned = e.time
    }
  }
  return ops
}
