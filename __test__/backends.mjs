// Which backends the JS suites run on. The embedded store always; Redis when REDIS_URL is set
// (scripts/test.mjs starts a throwaway redis-server and sets it). In CI a missing Redis fails.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'

const require = createRequire(import.meta.url)
export const { Flowguard } = require('../index.js')

if (process.env.CI === 'true' && !process.env.REDIS_URL) {
  throw new Error('CI=true but REDIS_URL is not set: the Redis suites must run in CI')
}

/** A prefix no other test uses, so tests are independent on a shared Redis or embedded store. */
export function freshPrefix(tag = 't') {
  return `test:${tag}:${randomBytes(6).toString('hex')}:`
}

/** [{ name, open(extraOptions) }] for every available backend. */
export function backends() {
  const list = [{ name: 'embedded', url: undefined }]
  if (process.env.REDIS_URL) list.push({ name: 'redis', url: process.env.REDIS_URL })
  return list.map((b) => ({
    name: b.name,
    url: b.url,
    open: (extra = {}) => Flowguard.open({ url: b.url, prefix: freshPrefix(b.name), ...extra }),
  }))
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
