'use strict'
// The package entry: the public class `Flowguard`, assembled from the native client of the
// generated napi-rs binding (binding.js) and the JavaScript parts in lib/, one file per concept:
//   lib/item-results.js  claim / complete / fail results built from the compact native form
//   lib/queue-results.js enqueue / readBatch / ack / release results built from the compact native form
//   lib/with-lease.js    withLock / withPermit: a function under a lock or permit, its lease kept, an AbortSignal
//   lib/job-state.js     getState / getStates / setState: JavaScript values as JSON
//   lib/once.js          once: a function run once per idempotency key
// The class holds the native client; the native prototype is left as generated.

const binding = require('./binding.js')
const items = require('./lib/item-results.js')
const queue = require('./lib/queue-results.js')
const { withLock, withPermit } = require('./lib/with-lease.js')
const { getState, getStates, setState } = require('./lib/job-state.js')
const { once } = require('./lib/once.js')
const { coded } = require('./lib/errors.js')

const Native = binding.Flowguard
// Only `open` may construct: a client without a native one behind it would fail on every call.
const OPEN = Symbol('Flowguard.open')

/** A client of one backend (see index.d.ts). */
class Flowguard {
  #native
  #embedded

  constructor(native, token) {
    if (token !== OPEN) {
      throw coded(TypeError, 'ERR_INVALID_ARGUMENT', 'Flowguard has no public constructor: use `await Flowguard.open(options)`')
    }
    this.#native = native
    this.#embedded = native.backend === 'embedded' || native.backend === 'durable'
  }

  /** Opens a client: the embedded store without `options.url`, else Redis. */
  static async open(options) {
    return new Flowguard(await Native.open(options), OPEN)
  }

  /** The shard of `id` in a queue of `shards` shards: `fnv1a(id) % shards`. */
  static shardOf(id, shards) {
    return Native.shardOf(id, shards)
  }

  get backend() {
    return this.#native.backend
  }

  get prefix() {
    return this.#native.prefix
  }

  /**
   * Lets go of the store: the Redis connection, or the durable file (closed, its -wal/-shm removed,
   * once no open client of the same settings uses it). Later calls reject with ERR_CLOSED; the
   * in-memory store has nothing to let go and goes on answering.
   */
  close() {
    return this.#native.close()
  }

  // Item Tracker.
  claim(group, id, options) {
    return items.claim(this.#native, this.#embedded, group, id, options)
  }

  complete(group, id, options) {
    return items.complete(this.#native, group, id, options)
  }

  fail(group, id, reason, options) {
    return items.fail(this.#native, group, id, reason, options)
  }

  claimMany(group, ids, options) {
    return this.#native.claimMany(group, ids, options)
  }

  claimBatch(group, ids, options) {
    return this.#native.claimBatch(group, ids, options)
  }

  setItems(group, requests) {
    if (Array.isArray(requests) && requests.some((r) => r && typeof r === 'object' && r.result !== undefined)) {
      try {
        requests = requests.map((r, i) => items.withResultJson(r, `requests[${i}].result`))
      } catch (err) {
        return Promise.reject(err)
      }
    }
    return this.#native.setItems(group, requests)
  }

  getItem(group, id) {
    return this.#native.getItem(group, id)
  }

  getItems(group, ids) {
    return this.#native.getItems(group, ids)
  }

  unsetItem(group, id) {
    return this.#native.unsetItem(group, id)
  }

  listItems(group, options) {
    return this.#native.listItems(group, options)
  }

  reviveItems(group, ids, options) {
    return this.#native.reviveItems(group, ids, options)
  }

  // Concurrency Lock.
  acquireLock(name, options) {
    return this.#native.acquireLock(name, options)
  }

  releaseLock(name, owner) {
    return this.#native.releaseLock(name, owner)
  }

  forceReleaseLock(name, fence) {
    return this.#native.forceReleaseLock(name, fence)
  }

  extendLock(name, owner, options) {
    return this.#native.extendLock(name, owner, options)
  }

  getLock(name) {
    return this.#native.getLock(name)
  }

  withLock(name, fn, options) {
    return withLock(this.#native, name, fn, options)
  }

  // Dedup Queue.
  enqueue(name, ids, options) {
    return queue.enqueue(this.#native, name, ids, options)
  }

  readBatch(name, options) {
    return queue.readBatch(this.#native, name, options)
  }

  ack(name, owner, ids, options) {
    return queue.ack(this.#native, name, owner, ids, options)
  }

  release(name, owner, ids, options) {
    return queue.release(this.#native, name, owner, ids, options)
  }

  peek(queue, options) {
    return this.#native.peek(queue, options)
  }

  queueSize(queue, options) {
    return this.#native.queueSize(queue, options)
  }

  deadLetters(queue, options) {
    return this.#native.deadLetters(queue, options)
  }

  requeueDead(queue, ids, options) {
    return this.#native.requeueDead(queue, ids, options)
  }

  // Rate Limiter.
  rateLimit(name, options) {
    return this.#native.rateLimit(name, options)
  }

  waitRateLimit(name, options) {
    return this.#native.waitRateLimit(name, options)
  }

  pauseRateLimit(name, options) {
    return this.#native.pauseRateLimit(name, options)
  }

  getRateLimit(name) {
    return this.#native.getRateLimit(name)
  }

  // Semaphore.
  acquirePermit(name, options) {
    return this.#native.acquirePermit(name, options)
  }

  releasePermit(name, owner) {
    return this.#native.releasePermit(name, owner)
  }

  forceReleasePermit(name, fence) {
    return this.#native.forceReleasePermit(name, fence)
  }

  extendPermit(name, owner, options) {
    return this.#native.extendPermit(name, owner, options)
  }

  getSemaphore(name) {
    return this.#native.getSemaphore(name)
  }

  withPermit(name, fn, options) {
    return withPermit(this.#native, name, fn, options)
  }

  // Job State.
  getState(key) {
    return getState(this.#native, key)
  }

  getStates(keys) {
    return getStates(this.#native, keys)
  }

  setState(key, value, options) {
    return setState(this.#native, key, value, options)
  }

  getStateJson(keys) {
    return this.#native.getStateJson(keys)
  }

  setStateJson(key, json, options) {
    return this.#native.setStateJson(key, json, options)
  }

  deleteState(key) {
    return this.#native.deleteState(key)
  }

  increment(key, by, options) {
    return this.#native.increment(key, by, options)
  }

  claimKey(key, options) {
    return this.#native.claimKey(key, options)
  }

  completeKey(key, owner, json, options) {
    return this.#native.completeKey(key, owner, json, options)
  }

  releaseKey(key, owner) {
    return this.#native.releaseKey(key, owner)
  }

  once(key, fn, options) {
    return once(this.#native, key, fn, options)
  }
}

// `await using client = await Flowguard.open(…)` closes the client at the end of the block.
if (typeof Symbol.asyncDispose === 'symbol') {
  Flowguard.prototype[Symbol.asyncDispose] = function () {
    return this.close()
  }
}

module.exports = { Flowguard, __napiBindingTarget: binding.__napiBindingTarget }
