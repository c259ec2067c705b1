// Which backends the JS suites run on. The embedded store always; Redis when REDIS_URL is set
// (scripts/test.mjs starts a throwaway redis-server and sets it). In CI a missing Redis fails.
import { createRequire } from 'node:module'
import { randomBytes, createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
export const { Flowguard } = require('../index.js')

/** The seed URLs of a Redis Cluster (comma-separated REDIS_CLUSTER_URLS), for the cluster run. */
export const clusterUrls = process.env.REDIS_CLUSTER_URLS ? process.env.REDIS_CLUSTER_URLS.split(',') : undefined

if (process.env.CI === 'true' && !process.env.REDIS_URL && !clusterUrls) {
  throw new Error('CI=true but REDIS_URL is not set: the Redis suites must run in CI')
}

/** A prefix no other test uses, so tests are independent on a shared Redis or embedded store. */
export function freshPrefix(tag = 't') {
  return `test:${tag}:${randomBytes(6).toString('hex')}:`
}

let durableDir
/** A folder of this process for durable store files, removed when the process exits. */
export function durableFolder() {
  if (!durableDir) {
    durableDir = mkdtempSync(join(tmpdir(), 'fg-durable-'))
    process.on('exit', () => rmSync(durableDir, { recursive: true, force: true }))
  }
  return durableDir
}

/** The durable store file of a prefix: clients opened with the same prefix share it, as they
 * share the in-memory store. */
export function durablePath(prefix) {
  return join(durableFolder(), createHash('sha256').update(prefix).digest('hex').slice(0, 16) + '.db')
}

/** [{ name, open(extraOptions) }] for every available backend: the in-memory embedded store,
 * the durable one (a file per prefix), Redis when REDIS_URL is set and a Redis Cluster when
 * REDIS_CLUSTER_URLS is. FLOWGUARD_BACKENDS (comma-separated names) keeps only those named. */
export function backends() {
  let list = [
    { name: 'embedded', url: undefined },
    { name: 'durable', url: undefined },
  ]
  if (process.env.REDIS_URL) list.push({ name: 'redis', url: process.env.REDIS_URL })
  if (clusterUrls) list.push({ name: 'cluster', cluster: clusterUrls })
  // PostgreSQL only when asked for by name (FLOWGUARD_BACKENDS=postgres; scripts/test.mjs runs
  // the suites of docs/postgres.md on it), on the URL of FLOWGUARD_TEST_POSTGRES_URL.
  if (process.env.FLOWGUARD_TEST_POSTGRES_URL && process.env.FLOWGUARD_BACKENDS?.split(',').includes('postgres')) {
    list.push({ name: 'postgres', postgres: process.env.FLOWGUARD_TEST_POSTGRES_URL })
  }
  if (process.env.FLOWGUARD_BACKENDS) {
    const only = process.env.FLOWGUARD_BACKENDS.split(',')
    list = list.filter((b) => only.includes(b.name))
  }
  return list.map((b) => ({
    name: b.name,
    url: b.url,
    open: (extra = {}) => {
      const opts = { url: b.url, prefix: freshPrefix(b.name), ...extra }
      if (b.cluster) opts.cluster ??= b.cluster
      if (b.postgres) opts.postgres ??= b.postgres
      if (b.name === 'durable') opts.path ??= durablePath(opts.prefix)
      return Flowguard.open(opts)
    },
  }))
}

/** Backends that several processes can share, for the multi-process suites (crash,
 * contention): the durable store (one fresh file) and Redis when REDIS_URL is set. `env` is what
 * the fixture processes need (they open with `openFromEnv`). */
export function sharedTargets(tag) {
  const path = join(durableFolder(), `${tag}-${randomBytes(4).toString('hex')}.db`)
  return [
    { name: 'durable', skip: false, env: { FG_PATH: path }, open: (prefix) => Flowguard.open({ path, prefix }) },
    {
      name: 'redis',
      skip: !process.env.REDIS_URL && 'REDIS_URL not set',
      env: {},
      open: (prefix) => Flowguard.open({ url: process.env.REDIS_URL, prefix }),
    },
  ]
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Resolves to the error a promise rejects with (fails if it resolves). */
export async function rejection(p) {
  try {
    await p
  } catch (e) {
    return e
  }
  throw new Error('expected a rejection, but the promise resolved')
}
