'use strict'
// Running a function once per idempotency key, on the native claimKey / completeKey /
// releaseKey: the first caller runs it and stores the result; the others wait for the result.
const { coded, invalid } = require('./errors.js')
const { optionsObject, durationMs, functionArg } = require('./options.js')
const { toJson } = require('./job-state.js')

const DEFAULT_LEASE_MS = 600000
const MAX_RESULT_BYTES = 1024 * 1024
const OPTIONS = ['ttlMs', 'leaseMs', 'waitMs']

function onceTimeout(key, waitMs) {
  return coded(Error, 'ERR_TIMEOUT', `idempotency key ${JSON.stringify(key)} is still being worked on by another caller after waiting ${waitMs} ms`)
}

/**
 * fn ran, but its result could not be stored. The key is left as it is (never released here,
 * so that a retry cannot run fn a second time because of a store failure); the message says
 * what a retry will do.
 */
function notStored(key, value, err, leaseExpiresAt) {
  const k = JSON.stringify(key)
  const why = `${(err && err.code) || 'error'}: ${err && err.message}`
  const state =
    err && err.code === 'ERR_NOT_OWNER'
      ? `the key's lease ran out before the result was stored, so another caller may already be running fn again (give a leaseMs longer than fn takes)`
      : `the key stays claimed (pending) until its lease ends at about ${new Date(leaseExpiresAt).toISOString()}: until then other callers wait ` +
        `(ERR_TIMEOUT after their waitMs), after it a retry runs fn again (unless the store reached the backend despite the error; then callers get the stored result)`
  return coded(Error, 'ERR_RESULT_NOT_STORED', `once: fn ran for idempotency key ${k}, but its result was not stored (${why}); ${state}`, {
    cause: err,
    value,
    leaseExpiresAt,
  })
}

/**
 * Runs `fn()` once per idempotency key. The first caller runs it and its result is stored for
 * `ttlMs` (default 24 h); concurrent callers wait (up to `waitMs`, default `leaseMs`) and later
 * callers get the stored result without running `fn`. When `fn` throws or its result cannot be
 * stored at all (not JSON, over 1 MiB), the key is freed so a retry can run, and the error is
 * passed on. When storing a result fails, the key is not freed (ERR_RESULT_NOT_STORED).
 * Resolves to { value, ran }.
 */
async function once(native, key, fn, options) {
  functionArg(fn)
  const opts = optionsObject(options, OPTIONS)
  // All checked before fn runs: a bad option found only when storing the result would waste the run.
  const leaseMs = durationMs('leaseMs', opts.leaseMs)
  const ttlMs = durationMs('ttlMs', opts.ttlMs)
  const waitOption = durationMs('waitMs', opts.waitMs, true)
  const waitMs = waitOption !== undefined ? waitOption : leaseMs !== undefined ? leaseMs : DEFAULT_LEASE_MS
  const claimOptions = leaseMs !== undefined ? { leaseMs } : {}
  const storeOptions = ttlMs !== undefined ? { ttlMs } : {}
  const started = Date.now()
  for (;;) {
    // While another caller holds the key, the native claim waits (with backoff; on PostgreSQL woken
    // by the other caller's release or result, announced with NOTIFY) for what is left of waitMs.
    const left = Math.max(0, waitMs - (Date.now() - started))
    const claim = await native.claimKey(key, left > 0 ? { ...claimOptions, waitMs: left } : claimOptions)
    if (claim.status === 'done') return { value: JSON.parse(claim.json).v, ran: false }
    if (claim.status === 'claimed') {
      const leaseExpiresAt = Date.now() + claim.remainingMs
      let json
      try {
        // An envelope keeps an undefined result (stored as {}) apart from null.
        const result = await fn()
        json = result === undefined ? '{}' : `{"v":${toJson(result, 'result')}}`
        const bytes = Buffer.byteLength(json)
        if (bytes > MAX_RESULT_BYTES) {
          throw invalid('result', `is ${bytes} bytes of JSON; the limit is ${MAX_RESULT_BYTES} bytes (1 MiB)`)
        }
      } catch (err) {
        // fn threw, or its result can never be stored: a retry has to run fn anyway.
        await native.releaseKey(key, claim.owner).catch(() => {
          // The pending marker ends with its lease; the first error matters more.
        })
        throw err
      }
      // Callers that get the stored result see it through JSON too, so the first caller does.
      const value = JSON.parse(json).v
      try {
        await native.completeKey(key, claim.owner, json, storeOptions)
      } catch (err) {
        throw notStored(key, value, err, leaseExpiresAt)
      }
      return { value, ran: true }
    }
    if (waitMs - (Date.now() - started) <= 0) throw onceTimeout(key, waitMs)
  }
}

module.exports = { once }
