'use strict'
// Options of the JavaScript helpers (`once`), checked by the same rules as the native layer's,
// before any work is done: a bad option found only after `fn` ran would waste the run.
const { invalid, describe } = require('./errors.js')

/** The longest duration any option may give: 365 days, as in the core. */
const MAX_DURATION_MS = 365 * 24 * 3600 * 1000

/**
 * `options` as an object with only the `known` fields (undefined and null: none given).
 * Refuses a non-object and any unknown field, so a misspelt option cannot be ignored silently.
 */
function optionsObject(options, known, field = 'options') {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(field, `must be an object, got ${describe(options)}`)
  }
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) {
      throw invalid(field, `has an unknown field ${JSON.stringify(k)}; known fields: ${known.join(', ')}`)
    }
  }
  return options
}

/**
 * A duration option in ms: undefined when absent (undefined or null), else a finite number
 * above 0 (or 0 with `zeroOk`) and at most 365 days.
 */
function durationMs(field, v, zeroOk = false) {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number') throw invalid(field, `must be a number, got ${describe(v)}`)
  if (!Number.isFinite(v)) throw invalid(field, `must be a finite number of milliseconds, got ${v}`)
  if (v === 0 && zeroOk) return 0
  if (v <= 0) throw invalid(field, `must be greater than 0 milliseconds, got ${v}`)
  if (v > MAX_DURATION_MS) throw invalid(field, `is ${v} ms; the limit is ${MAX_DURATION_MS} ms (365 days)`)
  return v
}

/** `fn`, which must be a function. */
function functionArg(fn, field = 'fn') {
  if (typeof fn !== 'function') throw invalid(field, `must be a function, got ${describe(fn)}`)
  return fn
}

module.exports = { optionsObject, durationMs, functionArg }
