'use strict'
// Job State with JavaScript values: the native layer stores JSON text (`getStateJson`,
// `setStateJson`); the conversion, and what JSON cannot represent, is handled here.
const { invalid, describe } = require('./errors.js')

/**
 * JSON text of a JSON-serializable value. Refuses (ERR_INVALID_ARGUMENT) what JSON.stringify
 * would drop or mangle silently: undefined, functions, symbols, NaN and ±Infinity, at any depth;
 * and what it throws on: BigInt, cycles and nesting too deep for the stack. Objects with toJSON
 * (such as Date) are accepted.
 */
function toJson(value, field) {
  const where = (key) => (key === '' ? '' : `(at key ${JSON.stringify(key)}) `)
  let json
  try {
    json = JSON.stringify(value, function (key, v) {
      const t = typeof v
      if (t === 'undefined' || t === 'function' || t === 'symbol') {
        throw invalid(field, `${where(key)}is ${describe(v)}, which is not JSON`)
      }
      if (t === 'number' && !Number.isFinite(v)) throw invalid(field, `${where(key)}is ${v}, which is not JSON`)
      return v
    })
  } catch (err) {
    if (err && err.code === 'ERR_INVALID_ARGUMENT') throw err
    if (err instanceof RangeError) throw invalid(field, `is nested too deeply to be turned into JSON (${err.message})`)
    // BigInt ("Do not know how to serialize a BigInt"), cycles ("Converting circular structure")
    // and errors thrown by a toJSON method.
    throw invalid(field, `is not JSON-serializable: ${err instanceof Error ? err.message : describe(err)}`)
  }
  return json
}

const parse = (entry) => (entry.found ? JSON.parse(entry.json) : undefined)

/** One key, checked here so that the message names `key` (the native call reads a list). */
function stateKey(key) {
  if (typeof key !== 'string') throw invalid('key', `must be a string, got ${describe(key)}`)
  return key
}

/** The value of `key` (undefined when absent or expired). */
async function getState(native, key) {
  const [entry] = await native.getStateJson([stateKey(key)])
  return parse(entry)
}

/** The values of `keys`, in one round trip (undefined for each absent one). */
async function getStates(native, keys) {
  return (await native.getStateJson(keys)).map(parse)
}

/** Writes a JSON-serializable value; resolves to { written, value, expiresAt }. */
async function setState(native, key, value, options) {
  const r = await native.setStateJson(key, toJson(value, 'value'), options)
  return { written: r.written, value: r.written ? value : JSON.parse(r.json), expiresAt: r.expiresAt }
}

module.exports = { toJson, getState, getStates, setState }
