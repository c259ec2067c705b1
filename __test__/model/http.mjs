// The model test's HTTP shell: flowguard-server (crates/server) driven with the Node API's calls.
// Each call is sent as the route's JSON body (the Node API's positional arguments are body
// fields, see docs/server.md) and its answer is turned back into what the Node API returns, so
// the runner compares the two shells as it compares two backends: a result answered with a
// status (409 held or busy, 412 lost, 429 rate limited) is the result without its `code`; a
// bare boolean or number wrapped in an object is unwrapped; any other error is thrown with its
// code. The catalog (the listing routes, which the Node API does not have) is read whole, page
// by page, and sorted by name, so that page sizes and the order of a SCAN do not show.
import { startServer, stopServer } from '../../crates/server/e2e/server-process.mjs'

/** Statuses whose body is the call's result (with its `code` added), per route. */
const RESULT_STATUSES = {
  '/v1/tracker/claim': [409],
  '/v1/lock/acquire': [409],
  '/v1/lock/extend': [412],
  '/v1/semaphore/acquire': [409],
  '/v1/semaphore/extend': [412],
  '/v1/limiter/take': [429],
  '/v1/limiter/wait': [429],
  '/v1/state/claimKey': [409],
}

/** The listing routes: the Node-style name of the call, its route, its list and its name field. */
const LISTINGS = {
  listGroups: ['/v1/tracker/listGroups', 'groups', 'group'],
  listLocks: ['/v1/lock/list', 'locks', 'name'],
  listQueues: ['/v1/queue/list', 'queues', 'queue'],
  listLimiters: ['/v1/limiter/list', 'limiters', 'name'],
  listSemaphores: ['/v1/semaphore/list', 'semaphores', 'name'],
}

const coded = (body, status) => Object.assign(new Error(body?.message ?? `HTTP ${status}`), { code: body?.code, field: body?.field, status })

/** A client of one flowguard-server with the Node API's method names. */
export class HttpFlowguard {
  constructor(base) {
    this.base = base
  }

  async call(path, body) {
    const res = await fetch(this.base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const text = await res.text()
    let answer
    try {
      answer = JSON.parse(text)
    } catch {
      throw coded({ code: `not JSON (${res.status})`, message: text }, res.status)
    }
    if (res.status === 200) return answer
    if (RESULT_STATUSES[path]?.includes(res.status) && answer && typeof answer === 'object') {
      const { code, ...result } = answer
      return result
    }
    throw coded(answer, res.status)
  }

  // Item Tracker
  claim(group, id, o) { return this.call('/v1/tracker/claim', { group, id, ...o }) }
  complete(group, id, o) { return this.call('/v1/tracker/complete', { group, id, ...o }) }
  fail(group, id, reason, o) { return this.call('/v1/tracker/fail', { group, id, reason, ...o }) }
  claimMany(group, ids, o) { return this.call('/v1/tracker/claimMany', { group, ids, ...o }) }
  claimBatch(group, ids, o) { return this.call('/v1/tracker/claimBatch', { group, ids, ...o }) }
  setItems(group, requests) { return this.call('/v1/tracker/setItems', { group, requests }) }
  getItem(group, id) { return this.call('/v1/tracker/getItem', { group, id }) }
  getItems(group, ids) { return this.call('/v1/tracker/getItems', { group, ids }) }
  async unsetItem(group, id) { return (await this.call('/v1/tracker/unsetItem', { group, id })).existed }
  listItems(group, o) { return this.call('/v1/tracker/listItems', { group, ...o }) }
  reviveItems(group, ids, o) { return this.call('/v1/tracker/reviveItems', { group, ids, ...o }) }

  // Concurrency Lock
  acquireLock(name, o) { return this.call('/v1/lock/acquire', { name, ...o }) }
  releaseLock(name, owner) { return this.call('/v1/lock/release', { name, owner }) }
  forceReleaseLock(name, fence) { return this.call('/v1/lock/forceRelease', { name, fence }) }
  extendLock(name, owner, o) { return this.call('/v1/lock/extend', { name, owner, ...o }) }
  getLock(name) { return this.call('/v1/lock/get', { name }) }

  // Queue
  enqueue(queue, ids, o) { return this.call('/v1/queue/enqueue', { queue, ids, ...o }) }
  readBatch(queue, o) { return this.call('/v1/queue/readBatch', { queue, ...o }) }
  ack(queue, owner, ids, o) { return this.call('/v1/queue/ack', { queue, owner, ids, ...o }) }
  release(queue, owner, ids, o) { return this.call('/v1/queue/release', { queue, owner, ids, ...o }) }
  peek(queue, o) { return this.call('/v1/queue/peek', { queue, ...o }) }
  queueSize(queue, o) { return this.call('/v1/queue/size', { queue, ...o }) }
  deadLetters(queue, o) { return this.call('/v1/queue/deadLetters', { queue, ...o }) }
  requeueDead(queue, ids, o) { return this.call('/v1/queue/requeueDead', { queue, ids, ...o }) }

  // Job State (values are JSON over HTTP; the Node API's *Json calls carry its text)
  async setState(key, value, o) {
    const r = await this.call('/v1/state/set', { key, value, ...o })
    return { written: r.written, value: r.value, expiresAt: r.expiresAt } // as lib/job-state.js shapes it
  }
  async getState(key) {
    const e = await this.call('/v1/state/get', { key })
    return e.found ? e.value : undefined
  }
  async getStateJson(keys) {
    const entries = await this.call('/v1/state/getMany', { keys })
    return entries.map(({ value, ...e }) => (e.found ? { ...e, json: JSON.stringify(value) } : e))
  }
  async deleteState(key) { return (await this.call('/v1/state/delete', { key })).deleted }
  async increment(key, by, o) { return (await this.call('/v1/state/increment', { key, by, ...o })).value }
  async claimKey(key, o) {
    const { leaseMs, value, ...r } = await this.call('/v1/state/claimKey', { key, ...o })
    if (leaseMs !== undefined) r.remainingMs = leaseMs
    if (value !== undefined) r.json = JSON.stringify(value)
    return r
  }
  async completeKey(key, owner, json, o) {
    await this.call('/v1/state/completeKey', { key, owner, value: JSON.parse(json), ...o })
  }
  async releaseKey(key, owner) { return (await this.call('/v1/state/releaseKey', { key, owner })).released }

  // Rate Limiter and Semaphore
  rateLimit(name, o) { return this.call('/v1/limiter/take', { name, ...o }) }
  waitRateLimit(name, o) { return this.call('/v1/limiter/wait', { name, ...o }) }
  pauseRateLimit(name, o) { return this.call('/v1/limiter/pause', { name, ...o }) }
  acquirePermit(name, o) { return this.call('/v1/semaphore/acquire', { name, ...o }) }
  releasePermit(name, owner) { return this.call('/v1/semaphore/release', { name, owner }) }
  forceReleasePermit(name, fence) { return this.call('/v1/semaphore/forceRelease', { name, fence }) }
  extendPermit(name, owner, o) { return this.call('/v1/semaphore/extend', { name, owner, ...o }) }
  getSemaphore(name) { return this.call('/v1/semaphore/get', { name }) }
}

for (const [op, [path, list, key]] of Object.entries(LISTINGS)) {
  HttpFlowguard.prototype[op] = async function (o = {}) {
    const seen = new Map()
    let cursor
    do {
      const page = await this.call(path, { ...o, cursor })
      for (const entry of page[list]) seen.set(entry[key], entry)
      cursor = page.cursor
    } while (cursor !== undefined)
    return { [list]: [...seen.values()].sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0)) }
  }
}

/**
 * A flowguard-server of its own for one run (`args`: its backend's flags), and a client of it;
 * `stop()` ends the server.
 */
export async function openServer(args) {
  const server = await startServer(args, { FLOWGUARD_LOG: 'warn' })
  const fg = new HttpFlowguard(server.base)
  fg.stop = () => stopServer(server)
  return fg
}
