// The client side of a checked history: each operation is appended to this client's JSONL file
// as an `invoke` line before the call and one completion line after it: `ok` (it happened, with
// its result), `fail` (it certainly did not happen: a refusal) or `info` (unknown: an error such as
// a timeout or a lost connection, after which the call may or may not have taken effect). A
// process killed mid-call leaves an invoke without completion, which the parent turns into `info`.
// Lines are written with writeSync (one write each), so a SIGKILL loses at most the call in
// flight, never a line already reported. Times are process.hrtime.bigint() in ms: CLOCK_MONOTONIC,
// one clock for every process of the machine.
import { openSync, writeSync } from 'node:fs'

export const now = () => Number(process.hrtime.bigint()) / 1e6

/** Error codes after which the call certainly changed nothing (a definite failure). Everything
 * else (ERR_BACKEND_UNAVAILABLE, ERR_TIMEOUT, …) may have been applied before the reply was lost. */
const DEFINITE = new Set(['ERR_INVALID_ARGUMENT', 'ERR_NOT_OWNER', 'ERR_CLOCK_SKEW'])

/** How long a call may go unanswered before it is recorded as `info` (Jepsen's client timeout):
 * the backends' own timeouts come first (Redis commands 2 s here); this one catches a call that
 * would never settle at all (seen once with the HTTP client, fetch, while flowguard-server was
 * killed and restarted: the client process exited with 13, "unsettled top-level await"). */
const CALL_TIMEOUT_MS = Number(process.env.HISTORY_CALL_TIMEOUT_MS || 10_000)

/** A recorder for client `client` appending to file `path`. `op(p, f, value, fn)` runs `fn()`,
 * which resolves to `['ok' | 'fail', result]`, and records it; it resolves to `[type, result]`
 * (`['info', undefined]` or `['fail', undefined]` on an error, which it records with its code). */
export function recorder(path, client) {
  const fd = openSync(path, 'a')
  let seq = 0
  const line = (o) => writeSync(fd, JSON.stringify(o) + '\n')
  return async function op(p, f, value, fn) {
    const id = seq++
    line({ type: 'invoke', process: client, id, p, f, value, time: now() })
    let type
    let result
    let error
    let timer
    try {
      const late = new Promise((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`), { code: 'ERR_HISTORY_TIMEOUT' })), CALL_TIMEOUT_MS)
      })
      ;[type, result] = await Promise.race([fn(), late])
    } catch (e) {
      error = e?.code ?? String(e?.message ?? e)
      type = DEFINITE.has(e?.code) ? 'fail' : 'info'
    }
    clearTimeout(timer)
    line({ type, process: client, id, p, f, result, error, time: now() })
    return [type, result]
  }
}
