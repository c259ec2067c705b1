// HTTP clients of a server under a failover, for the suites of this folder: calls with a bearer
// token, and clients calling in a loop whose runs of failing calls are measured.
import assert from 'node:assert/strict'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A POST of JSON to `base` with `token`; resolves to `{ status, body }`. */
export function poster(base, token) {
  return async (path, body) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: await res.json() }
  }
}

/** The body of a 200 answer; throws any other answer (as `error.answer`). */
export function ok(r, what) {
  if (r.status !== 200) throw Object.assign(new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`), { answer: r })
  return r.body
}

/**
 * `clients` loops calling `round(client, i)` until `stop()`. A round may fail only with
 * ERR_BACKEND_UNAVAILABLE or ERR_TIMEOUT (counted by code); any other failure fails the test.
 * `stop()` resolves to `{ codes, longest }`: the failures by code, and the longest time one client
 * saw its rounds failing, ms.
 */
export function callers(clients, round) {
  const codes = {}
  const outages = []
  let stopped = false
  const loops = Array.from({ length: clients }, async (_, c) => {
    let failingSince = null
    for (let i = 0; !stopped; i++) {
      try {
        await round(c, i)
        if (failingSince !== null) outages.push([failingSince, Date.now()])
        failingSince = null
      } catch (e) {
        const code = e.answer?.body?.code
        assert.ok(['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT'].includes(code), e.message)
        codes[code] = (codes[code] ?? 0) + 1
        failingSince ??= Date.now()
        await sleep(10)
      }
    }
    if (failingSince !== null) outages.push([failingSince, Date.now()])
  })
  return {
    async stop() {
      stopped = true
      await Promise.all(loops)
      return { codes, longest: Math.max(0, ...outages.map(([s, e]) => e - s)) }
    },
  }
}
