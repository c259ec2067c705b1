// The n8n Cloud package's half of the install proof (run by scripts/install-proof.mjs, with its
// helpers, on the n8n it already set up): n8n-nodes-flowguard uninstalled (n8n keeps one node per
// display name), then n8n-nodes-flowguard-server, published to the same local registry, installed
// by name into the same n8n through POST /rest/community-packages; a
// flowguard-server started here (FLOWGUARD_SERVER_BIN, else the glibc debug build) with a token;
// the flowguard Server credential's Test (right token: OK; wrong token: refused); and the seed
// flows of n8n-nodes/examples, their flowguard nodes switched to the Cloud package's nodes on that
// server, run through `n8n execute`.
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { startServer } from '../../n8n-nodes/e2e/server-backend.mjs'

export const CLOUD_PACKAGE = 'n8n-nodes-flowguard-server'
const NODES = ['itemTracker', 'concurrencyLock', 'dedupQueue', 'rateLimit']
export const CLOUD_TYPES = NODES.map((n) => `${CLOUD_PACKAGE}.${n}`)

/** The flowguard-server binary: FLOWGUARD_SERVER_BIN, else the glibc debug build of the repository. */
export function serverBinary(root) {
  const bin = process.env.FLOWGUARD_SERVER_BIN || join(root, 'target', 'x86_64-unknown-linux-gnu', 'debug', 'flowguard-server')
  return existsSync(bin) ? bin : undefined
}

/** A copy of an example whose flowguard nodes are the Cloud package's, on the server of `cred`. */
function cloudVariant(wf, cred) {
  const w = structuredClone(wf)
  w.name = `${wf.name} [${CLOUD_PACKAGE}]`
  for (const n of w.nodes) {
    if (n.type.startsWith('n8n-nodes-flowguard.')) {
      n.type = `${CLOUD_PACKAGE}.${n.type.slice('n8n-nodes-flowguard.'.length)}`
      n.parameters.backend = 'server'
      if (n.parameters.options) {
        delete n.parameters.options.keyPrefix
        delete n.parameters.options.memoryOnly
      }
      n.credentials = { flowguardServerApi: { id: cred.id, name: cred.name } }
    }
    if (n.type === 'n8n-nodes-base.webhook') {
      n.parameters.path += '-cloud'
      n.webhookId = randomUUID()
    }
  }
  return w
}

const ids = (items) => items.map((j) => j.itemTracker?.id ?? j.id).sort().join(',')

/** What each seed flow must produce on the server: [file, check name, (out, run) => ok]. */
export const FLOWS = [
  ['01-project-loop.json', 'the weekly project loop: 5 claimed, globex and umbrella failed with their reason, acme, hooli and initech completed', (out) => {
    const failed = out('Mark failed') ?? []
    const completed = out('Mark completed') ?? []
    return (out('Claim project') ?? []).length === 5 && ids(failed) === 'globex,umbrella' &&
      failed.every((j) => j.itemTracker?.item?.status === 'failed' && /Simulated failure/.test(j.itemTracker.item.lastError)) &&
      ids(completed) === 'acme,hooli,initech' && completed.every((j) => j.itemTracker?.item?.status === 'completed')
  }],
  ['02-project-loop-status.json', 'the loop\'s status report: List counts 3 completed and 2 failed of 5', (out) => {
    const s = out('List projects')?.[0]
    return s?.counts?.completed === 3 && s.counts.failed === 2 && s.counts.total === 5 && s.items.length === 5
  }],
  ['05-locked-job.json', 'the locked job: the lock is taken, the job runs, the lock is released', (out) => {
    const took = out('Take the lock')?.[0]?.lock
    const rel = out('Release the lock')?.[0]?.lock
    return took?.acquired === true && /^[0-9a-f]{16,}$/.test(took.owner ?? '') && rel?.released === true
  }],
  ['07-stale-claim-refused.json', 'the stale claim: its complete is refused (a newer claim owns the item), the newer token completes it', (out) => {
    const stale = out('Complete with the stale token') ?? []
    const newer = out('Complete with the newer token') ?? []
    return stale.length === 1 && /now owned by a newer claim/.test(stale[0].error ?? '') &&
      newer.length === 1 && newer[0].itemTracker?.item?.status === 'completed'
  }],
  ['08-products-edited-enqueue.json', 'the enqueue of edited products: 6 IDs, 4 added, the 2 repeats duplicates', (out) =>
    (out('Enqueue product') ?? []).map((j) => j.dedupQueue?.outcome).join(',') === 'added,added,duplicate,added,duplicate,added'],
  ['09-product-sync-batch.json', 'the product sync: Read Batch claims the 4 queued IDs with one receipt, they are acked, the queue is empty', (out) => {
    const read = out('Read a batch') ?? []
    const acked = out('Ack synced products') ?? []
    const size = out('Queue size')?.[0]
    return read.length === 4 && new Set(read.map((j) => j.owner)).size === 1 && acked.length === 4 && acked.every((j) => j.dedupQueue?.ok === true) &&
      size?.waiting === 0 && size.claimed === 0
  }],
  ['10-queue-receipts.json', 'the queue receipts: a wrong receipt is refused (not_owner), release and ack with the right one', (out) => {
    const wrong = out('Ack with a wrong receipt') ?? []
    return (out('Read the batch') ?? []).length === 2 && wrong.length === 2 &&
      wrong.every((j) => j.dedupQueue?.ok === false && j.dedupQueue.reason === 'not_owner') && (out('Release for a retry in 30 s') ?? []).length > 0
  }],
]

/**
 * The Cloud package on `n8n` (stopped, its owner set up and the full package installed): install
 * by name, the credential's Test, the seed flows on a flowguard server. `h` are install-proof's
 * helpers: check, figures, log, freePort, parseRun, outOf, nodesDir, serverBin.
 */
export async function proveCloud(label, n8n, h) {
  const t0 = Date.now()
  const L = `${label} [${CLOUD_PACKAGE}]`
  const token = randomBytes(16).toString('hex')
  const server = await startServer({ bin: h.serverBin, dir: n8n.run.cwd, port: await h.freePort(), token, log: h.log })
  try {
    const ready = await fetch(`${server.url}/readyz`).then((r) => r.ok, () => false)
    h.check(`${L}: a flowguard-server started by the proof answers /readyz (${h.serverBin})`, ready && server.child.exitCode === null)
    if (!ready) return
    h.check(`${L}: n8n starts again`, await n8n.start())
    const login = await n8n.login()
    h.check(`${L}: owner logs in`, login.status === 200, `${login.status} ${login.text.slice(0, 300)}`)

    // n8n keeps one installed node per display name (installed_nodes.name is unique: installing the
    // second package fails with SQLITE_CONSTRAINT), so a user switching packages uninstalls the first.
    const un = await n8n.rest('DELETE', '/rest/community-packages?name=n8n-nodes-flowguard')
    h.check(`${L}: n8n-nodes-flowguard is uninstalled first through DELETE /rest/community-packages (one node per display name)`, un.status === 200, `${un.status} ${un.text.slice(0, 300)}`)
    const t1 = Date.now()
    const inst = await n8n.rest('POST', '/rest/community-packages', { name: CLOUD_PACKAGE })
    const secs = (Date.now() - t1) / 1000
    h.figures.push(`${L}: POST /rest/community-packages took ${secs.toFixed(1)} s (status ${inst.status})`)
    const types = ((inst.json?.data ?? inst.json)?.installedNodes ?? []).map((n) => n.type).sort()
    h.check(`${L}: n8n installs ${CLOUD_PACKAGE} by name (${secs.toFixed(1)} s) with its four nodes`, inst.status === 200 && JSON.stringify(types) === JSON.stringify([...CLOUD_TYPES].sort()), `${inst.status} ${inst.text.slice(0, 800)}`)
    if (inst.status !== 200) return
    const pkgDir = join(n8n.run.userFolder, '.n8n', 'nodes', 'node_modules', CLOUD_PACKAGE)
    const installed = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
    h.check(`${L}: the installed package has no dependencies (npm installed none: no node_modules in it) and n8n.strict: true`,
      installed.dependencies === undefined && !existsSync(join(pkgDir, 'node_modules')) && installed.n8n?.strict === true,
      JSON.stringify({ dependencies: installed.dependencies, node_modules: existsSync(join(pkgDir, 'node_modules')), n8n: installed.n8n }))
    const loaded = await n8n.nodeTypes()
    const missing = CLOUD_TYPES.filter((t) => !loaded.includes(t))
    const stale = loaded.filter((t) => t.startsWith('n8n-nodes-flowguard.'))
    h.check(`${L}: /types/nodes.json lists its four nodes (and none of n8n-nodes-flowguard's)`, missing.length === 0 && stale.length === 0, `missing ${missing.join(', ')}; still loaded ${stale.join(', ')}`)

    // The credential the flows use, saved through REST; then its Test button (POST
    // /rest/credentials/test, as the credential dialog sends it) with the server's token and a wrong one.
    const created = await n8n.rest('POST', '/rest/credentials', { name: 'flowguard server (proof)', type: 'flowguardServerApi', data: { url: server.url, token } })
    const cred = created.json?.data ?? created.json
    h.check(`${L}: the flowguard Server credential is saved through REST`, created.status === 200 && cred?.id, `${created.status} ${created.text.replaceAll(token, '<token>').slice(0, 300)}`)
    const test = async (data) => {
      const r = await n8n.rest('POST', '/rest/credentials/test', { credentials: { id: cred?.id ?? 'unsaved', name: cred?.name ?? 'flowguard server', type: 'flowguardServerApi', data } })
      return r.json?.data ?? { status: r.status, text: r.text.slice(0, 300) }
    }
    const ok = await test({ url: server.url, token })
    const bad = await test({ url: server.url, token: 'wrong-token-0123456789' })
    h.check(
      `${L}: the credential's Test passes with the server's token and fails with a wrong one ("${bad?.message}")`,
      ok?.status === 'OK' && ok.message === 'Connection successful (flowguard server)' && bad?.status === 'Error' && /refused the token/.test(bad.message ?? '') &&
        !JSON.stringify([ok, bad]).includes(token),
      JSON.stringify({ ok, bad }).replaceAll(token, '<token>').slice(0, 500),
    )
    await n8n.stop()
    if (!cred?.id) return

    // The seed flows, their flowguard nodes the Cloud package's: imported in one call and run in
    // one process by n8n's CLI (execute-batch, one after the other in the order of their IDs, which
    // is the order of FLOWS: the status report after the loop, the sync after the enqueue), each
    // run's data saved as a snapshot file.
    const t2 = Date.now()
    const flows = FLOWS.map(([file, what, expect], i) => {
      const wf = cloudVariant(JSON.parse(readFileSync(join(h.nodesDir, 'examples', file), 'utf8')), cred)
      wf.id = `fgCloud${String(i + 1).padStart(2, '0')}${wf.id}`
      return { file, what, expect, wf }
    })
    const dir = join(n8n.run.cwd, 'cloud-flows')
    const snapshots = join(dir, 'snapshots')
    mkdirSync(snapshots, { recursive: true })
    writeFileSync(join(dir, 'flows.json'), JSON.stringify(flows.map((f) => f.wf)))
    const imp = n8n.cli(['import:workflow', `--input=${join(dir, 'flows.json')}`])
    h.check(`${L}: import the ${flows.length} seed flows with their flowguard nodes switched to ${CLOUD_PACKAGE}'s`, imp.status === 0, (imp.stderr ?? '').slice(-400))
    const batch = n8n.cli(['execute-batch', `--ids=${flows.map((f) => f.wf.id).join(',')}`, `--snapshot=${snapshots}`, `--output=${join(dir, 'summary.json')}`])
    let summary = {}
    try {
      summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'))
    } catch {
      summary = { error: (batch.stdout + batch.stderr).slice(-1200) }
    }
    for (const { file, what, expect, wf } of flows) {
      const snap = join(snapshots, `${wf.id}-snapshot.json`)
      const run = existsSync(snap) ? JSON.parse(readFileSync(snap, 'utf8')) : undefined
      const out = (name, output = 0) => h.outOf(run, name, output)
      const ranOurs = wf.nodes.filter((n) => n.type.startsWith(`${CLOUD_PACKAGE}.`)).every((n) => out(n.name) !== undefined)
      let good = false
      try {
        good = Boolean(run) && !run.data?.resultData?.error && ranOurs && expect(out, run)
      } catch {
        good = false
      }
      const why = run
        ? JSON.stringify(Object.fromEntries(wf.nodes.map((n) => [n.name, out(n.name)]))).slice(0, 1500)
        : JSON.stringify(summary.summary?.errors?.find((e) => e.workflowId === wf.id) ?? summary).slice(0, 1200)
      h.check(`${L}: example ${file} on the server through the Cloud package's nodes: ${what}`, good, why)
    }
    h.figures.push(`${L}: the ${flows.length} seed flows took ${((Date.now() - t2) / 1000).toFixed(1)} s (one import, one execute-batch)`)
  } finally {
    await n8n.stop()
    await server.stop()
    h.figures.push(`${L}: took ${((Date.now() - t0) / 1000).toFixed(1)} s in total (server start, n8n start, install, credential, flows)`)
  }
}
