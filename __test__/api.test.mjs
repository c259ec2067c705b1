// The shape of the public class: every method and static of the generated binding (binding.d.ts)
// plus the JavaScript helpers, on a class of its own that leaves the native prototype as generated.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { backends, Flowguard, rejection } from './backends.mjs'

const require = createRequire(import.meta.url)
const binding = require('../binding.js')
const pkg = require('../index.js')

const dts = readFileSync(new URL('../binding.d.ts', import.meta.url), 'utf8')
const body = dts.slice(dts.indexOf('export declare class Flowguard {'))
const classBody = body.slice(0, body.indexOf('\n}\n'))
const members = [...classBody.matchAll(/^ {2}(static |get )?(\w+)\(/gm)].map((m) => ({ kind: (m[1] || '').trim(), name: m[2] }))
const HELPERS = ['claim', 'complete', 'fail', 'enqueue', 'readBatch', 'ack', 'release', 'withLock', 'withPermit', 'getState', 'getStates', 'setState', 'once']

test('every member of binding.d.ts is on the public class, and the helpers too', () => {
  assert.ok(members.length > 20, `read ${members.length} members from binding.d.ts`)
  for (const { kind, name } of members) {
    if (kind === 'static') assert.equal(typeof Flowguard[name], 'function', `static ${name}`)
    else if (kind === 'get') assert.ok(Object.getOwnPropertyDescriptor(Flowguard.prototype, name)?.get, `getter ${name}`)
    else assert.equal(typeof Flowguard.prototype[name], 'function', `method ${name}`)
  }
  for (const name of HELPERS) assert.equal(typeof Flowguard.prototype[name], 'function', name)
  assert.equal(pkg.__napiBindingTarget, binding.__napiBindingTarget)
  assert.equal(Flowguard.shardOf('a', 8), binding.Flowguard.shardOf('a', 8))
})

test('the native prototype is left as generated', () => {
  assert.notEqual(Flowguard, binding.Flowguard)
  for (const name of HELPERS) assert.equal(Object.hasOwn(binding.Flowguard.prototype, name), false, name)
})

test('only open constructs a client', async () => {
  const e = await rejection((async () => new Flowguard())())
  assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
  assert.match(e.message, /Flowguard\.open/)
})

for (const b of backends()) {
  test(`a client on ${b.name}: instanceof, backend, prefix, a native call and a helper`, async () => {
    const fg = await b.open({ prefix: `api:${b.name}:${Date.now()}:` })
    assert.ok(fg instanceof Flowguard)
    assert.equal(fg.backend, b.name)
    assert.match(fg.prefix, /^api:/)
    assert.equal((await fg.acquireLock('x')).acquired, true)
    assert.equal((await fg.claim('g', 'i')).claimed, true)
    assert.deepEqual(await fg.once('k', () => 1), { value: 1, ran: true })
  })
}
