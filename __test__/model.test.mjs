// The executable spec: seeded random sequences of calls on every pattern, with hostile and
// invalid names, run step by step against the embedded store and Redis; every result and error
// code must agree once what legitimately differs is normalised (owner tokens, clock readings:
// see model/normalise.mjs). On a mismatch the failing sequence is shrunk and printed as code,
// with the seed to run it again.
//
// FLOWGUARD_MODEL_STEPS (default 3000) steps in sequences of 500, each on fresh prefixes, with
// seeds FLOWGUARD_MODEL_SEED (default random), +1, +2, …
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomInt } from 'node:crypto'
import { generate } from './model/generate.mjs'
import { execute, shrink, describe } from './model/run.mjs'

const url = process.env.REDIS_URL
const steps = Number(process.env.FLOWGUARD_MODEL_STEPS || 3000)
const first = process.env.FLOWGUARD_MODEL_SEED !== undefined ? Number(process.env.FLOWGUARD_MODEL_SEED) >>> 0 : randomInt(2 ** 31)
const PER_SEQUENCE = 500

test('model: the embedded store and Redis agree on every result and error', { skip: url ? false : 'needs REDIS_URL', timeout: 3600_000 }, async (t) => {
  let done = 0
  const stats = new Map()
  for (let i = 0; done < steps; i++) {
    const seed = (first + i) >>> 0
    const n = Math.min(PER_SEQUENCE, steps - done)
    const seq = generate(seed, n)
    const failure = await execute(seq, url, stats)
    if (failure) {
      const small = await shrink(seq, failure, url, 60_000)
      assert.fail(
        `seed ${seed} (FLOWGUARD_MODEL_SEED=${seed} FLOWGUARD_MODEL_STEPS=${n} reruns this sequence): ` +
          `${describe(small.seq, small.failure)}`,
      )
    }
    done += n
  }
  // What the steps did (operation and outcome on the embedded store), to see what was covered.
  t.diagnostic([...stats].sort().map(([k, n]) => `${k}: ${n}`).join(', '))
  t.diagnostic(`${done} steps, seeds ${first}..${(first + Math.ceil(steps / PER_SEQUENCE) - 1) >>> 0}`)
})
