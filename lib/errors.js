'use strict'
// Coded errors of the JavaScript layer, in the shape the native layer uses: an Error with a
// stable `code` and a message naming the bad input.

/** An error with a stable `code` (and extra fields such as `cause`). */
function coded(Ctor, code, message, fields) {
  const e = new Ctor(message, fields && 'cause' in fields ? { cause: fields.cause } : undefined)
  e.code = code
  if (fields) for (const k of Object.keys(fields)) if (k !== 'cause') e[k] = fields[k]
  return e
}

/**
 * ERR_INVALID_ARGUMENT about the argument `field` (e.g. `options.waitMs`), as the native layer's:
 * `field` as a property and the message `${field} ${what}`.
 */
const invalid = (field, what) => coded(TypeError, 'ERR_INVALID_ARGUMENT', `${field} ${what}`, { field })

/**
 * How a bad value is named in a message. Never converts the value to text itself: a Symbol, an
 * object without a prototype or a deeply nested array would throw (TypeError, RangeError)
 * while the message is built instead of giving the coded error.
 */
function describe(v) {
  if (v === null) return 'null'
  switch (typeof v) {
    case 'undefined':
      return 'undefined'
    case 'number':
    case 'boolean':
      return String(v)
    case 'string':
      return 'a string'
    case 'bigint':
      return 'a bigint'
    case 'symbol':
      return 'a symbol'
    case 'function':
      return 'a function'
    default:
      return Array.isArray(v) ? 'an array' : 'an object'
  }
}

module.exports = { coded, invalid, describe }
