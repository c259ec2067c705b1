// One client process of a checked history (forked by harness.mjs). Opens flowguard on the
// backend named by the environment (FG_PATH: the durable store in that file; FG_POSTGRES_URL: a
// PostgreSQL database; FG_SERVER_URL: a flowguard-server; FG_CLUSTER: Redis Cluster seed URLs,
// comma-separated; else REDIS_URL), tells the parent it is ready, waits for `go` (the barrier:
// every client starts together), then runs every workload of workloads.mjs at once until the deadline the parent gave (a
// CLOCK_MONOTONIC time, so clients started later as replacements stop at the same time), recording
// each operation with record.mjs into HIST_FILE. FG_PLANTED_BUGS=1 runs them through the broken
// wrapper of planted-bugs.mjs.
import { createRequire } from 'node:module'
import { recorder, now } from './record.mjs'
import { workloads } from './workloads.mjs'
import { plantBugs, plantRegisterBug } from './planted-bugs.mjs'
import { registerClient } from './fenced-register.mjs'

const require = createRequire(import.meta.url)
const { Flowguard } = require('../../index.js')
const { once } = require('../../lib/once.js')
const { FG_PATH, FG_POSTGRES_URL, FG_CLUSTER, REDIS_URL, FG_SERVER_URL, FG_PREFIX, HIST_FILE, CLIENT, LEASE_MS, FG_PLANTED_BUGS } = process.env

// FG_SERVER_URL: a flowguard-server, through the model test's HTTP client (the Node API's names).
const { HttpFlowguard } = FG_SERVER_URL ? await import('../model/http.mjs') : {}
const options = FG_PATH
  ? { path: FG_PATH, prefix: FG_PREFIX }
  : FG_POSTGRES_URL
    ? { postgres: FG_POSTGRES_URL, prefix: FG_PREFIX, connectTimeoutMs: 500, commandTimeoutMs: 2000 }
    : FG_CLUSTER
      ? { cluster: FG_CLUSTER.split(','), prefix: FG_PREFIX, connectTimeoutMs: 500, commandTimeoutMs: 2000 }
      : { url: REDIS_URL, prefix: FG_PREFIX, connectTimeoutMs: 500, commandTimeoutMs: 2000 }
// A replacement may start while redis-server is being restarted: it tries again until it is back.
let opened = FG_SERVER_URL && new HttpFlowguard(FG_SERVER_URL)
for (let i = 0; !opened; i++) {
  opened = await Flowguard.open(options).catch((e) => {
    if (i >= 50) throw e
    return new Promise((r) => setTimeout(r, 100))
  })
}
// The HTTP client has the primitives of `once` (claimKey, completeKey, releaseKey): the addon's
// own `once` runs on them.
if (!opened.once) opened.once = (key, fn, o) => once(opened, key, fn, o)
const fg = FG_PLANTED_BUGS === '1' ? plantBugs(opened) : opened
const register = FG_PLANTED_BUGS === '1' ? plantRegisterBug(registerClient(CLIENT)) : registerClient(CLIENT)
const op = recorder(HIST_FILE, CLIENT)
const go = new Promise((r) => process.on('message', (m) => m?.deadline !== undefined && r(m)))
process.send({ ready: true })
const { deadline } = await go
const running = () => now() < deadline
// `unwrapped`: the lock-set takes its lock from the real client even with planted bugs, so that what
// its checker finds comes from the register's planted bug alone.
const ctx = { fg, unwrapped: opened, op, lease: Number(LEASE_MS), running, deadline, client: CLIENT, register }
await Promise.all(Object.values(workloads).map((w) => w(ctx)))
process.disconnect()
process.exit(0)
