// Options objects: an option name that is not known is refused with ERR_INVALID_ARGUMENT naming
// it (a misspelt `url` must never silently give the embedded store), wrong types name the field
// in JavaScript terms, and checks that apply to every request apply to every request.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { backends, Flowguard, freshPrefix, rejection } from './backends.mjs'

const Native = createRequire(import.meta.url)('../binding.js').Flowguard

const TOKEN = 'a'.repeat(32)

// [description, call(fg, extra options), where the unknown name is reported]
const calls = [
  ['claim', (fg, o) => fg.claim('g', 'a', o), 'options'],
  ['claimMany', (fg, o) => fg.claimMany('g', ['a'], o), 'options'],
  ['claimBatch', (fg, o) => fg.claimBatch('g', ['a'], o), 'options'],
  ['complete', (fg, o) => fg.complete('g', 'a', o), 'options'],
  ['fail', (fg, o) => fg.fail('g', 'a', 'why', o), 'options'],
  ['setItems entry', (fg, o) => fg.setItems('g', [{ id: 'a', status: 'in_progress', ...o }]), 'requests[0]'],
  ['listItems', (fg, o) => fg.listItems('g', o), 'options'],
  ['acquireLock', (fg, o) => fg.acquireLock('n', o), 'options'],
  ['withLock', (fg, o) => fg.withLock('n', () => 1, o), 'options'],
  ['extendLock', (fg, o) => fg.extendLock('n', TOKEN, o), 'options'],
  ['enqueue', (fg, o) => fg.enqueue('q', 'a', o), 'options'],
  ['readBatch', (fg, o) => fg.readBatch('q', o), 'options'],
  ['ack', (fg, o) => fg.ack('q', TOKEN, 'a', o), 'options'],
  ['release', (fg, o) => fg.release('q', TOKEN, 'a', o), 'options'],
  ['peek', (fg, o) => fg.peek('q', o), 'options'],
  ['queueSize', (fg, o) => fg.queueSize('q', o), 'options'],
  ['deadLetters', (fg, o) => fg.deadLetters('q', o), 'options'],
  ['requeueDead', (fg, o) => fg.requeueDead('q', 'a', o), 'options'],
  ['setState', (fg, o) => fg.setState('k', 1, o), 'options'],
  ['setStateJson', (fg, o) => fg.setStateJson('k', '1', o), 'options'],
  ['increment', (fg, o) => fg.increment('k', 1, o), 'options'],
  ['claimKey', (fg, o) => fg.claimKey('k', o), 'options'],
  ['completeKey', (fg, o) => fg.completeKey('k', TOKEN, '1', o), 'options'],
]

describe('Flowguard.open', () => {
  for (const opts of [{ ulr: 'redis://127.0.0.1:1' }, { nodes: ['redis://127.0.0.1:1'] }, { URL: 'x' }, { prefix: 'p:', connectTimeout: 5 }]) {
    test(`refuses ${JSON.stringify(opts)} instead of opening the embedded store`, async () => {
      const e = await rejection(Flowguard.open(opts))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      const name = Object.keys(opts).find((k) => !['prefix'].includes(k))
      assert.match(e.message, /^options has an unknown option/)
      assert.ok(e.message.includes(JSON.stringify(name)), e.message)
    })
  }
  test('cluster: a list of seed URLs, alone; a bad one is named; an unreachable cluster fails within the connect timeout', async () => {
    for (const [opts, pattern] of [
      [{ cluster: [] }, /^(options\.)?cluster must list 1 to 64 seed node URLs/],
      [{ cluster: ['redis://127.0.0.1:1'], url: 'redis://127.0.0.1:1' }, /^(options\.)?cluster cannot be given with url or path/],
      [{ cluster: ['redis://127.0.0.1:1', 'not a url'] }, /^(options\.)?cluster\[1\] is not a valid Redis URL/],
      [{ cluster: 7 }, /options\.cluster/],
    ]) {
      const e = await rejection(Flowguard.open(opts))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      assert.match(e.message, pattern)
    }
    const t0 = Date.now()
    const e = await rejection(Flowguard.open({ cluster: 'redis://127.0.0.1:1', connectTimeoutMs: 200 }))
    assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE', e.message)
    assert.ok(Date.now() - t0 < 2000)
  })
  test('undefined values of known options are absent, and null options are none', async () => {
    assert.equal((await Flowguard.open({ url: undefined, prefix: 'opt:' })).backend, 'embedded')
    assert.equal((await Flowguard.open(null)).backend, 'embedded')
  })
  test('a wrong type names the option', async () => {
    const e = await rejection(Flowguard.open({ commandTimeoutMs: '5' }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
    assert.equal(e.message, 'options.commandTimeoutMs must be a number, got a string')
    assert.equal((await rejection(Flowguard.open([]))).message, 'options must be an object, got an array')
  })
  test('rediss://…/#insecure is a configuration the client can use: an unreachable server is ERR_BACKEND_UNAVAILABLE', async () => {
    const e = await rejection(Flowguard.open({ url: 'rediss://127.0.0.1:1/#insecure', connectTimeoutMs: 300 }))
    assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE', e.message)
  })
})

for (const b of backends()) {
  describe(`options on ${b.name}`, () => {
    for (const [what, call, where] of calls) {
      test(`${what} refuses an unknown option, naming it`, async () => {
        const fg = await b.open()
        const e = await rejection(call(fg, { timeoutMS: 5 }))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
        assert.ok(e.message.startsWith(`${where} has an unknown option "timeoutMS"`), e.message)
        assert.equal((await fg.listItems('g')).counts.total, 0)
        assert.equal((await fg.getLock('n')).fence, 0)
        assert.equal((await fg.queueSize('q')).waiting, 0)
      })
    }

    test('setItems refuses a bad timeoutMs on every request, not only claims', async () => {
      const fg = await b.open()
      for (const status of ['completed', 'failed', 'none']) {
        for (const timeoutMs of [0, -1, NaN, 1e13, '5']) {
          const e = await rejection(fg.setItems('g', [{ id: 'a', status: 'in_progress' }, { id: 'b', status, timeoutMs }]))
          assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
          assert.ok(e.message.startsWith('requests[1].timeoutMs '), e.message)
        }
      }
      assert.equal((await fg.listItems('g')).counts.total, 0)
    })

    test('a bad number names the field in JavaScript terms', async () => {
      const fg = await b.open()
      const e = await rejection(fg.setItems('g', [{ id: 'a', status: 'completed' }, { id: 'b', status: 'completed', keepMs: 'x' }]))
      assert.equal(e.message, 'requests[1].keepMs must be a number of milliseconds or "forever", got "x"')
      assert.equal((await rejection(fg.complete('g', 'a', { keepMs: true }))).message, 'options.keepMs must be a number or a string, got a boolean')
      assert.equal((await rejection(fg.claim('g', 'a', { timeoutMs: '600' }))).message, 'options.timeoutMs must be a number, got a string')
      assert.match((await rejection(fg.readBatch('q', { visibilityTimeoutMs: 0 }))).message, /^visibilityTimeoutMs must be greater than 0/)
    })

    test('a throwing getter or Proxy is a coded error naming the field, not an exception left pending', async () => {
      const fg = await b.open()
      const getter = { get timeoutMs() { throw new Error('boom') } }
      let e = await rejection(fg.acquireLock('n', getter))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      assert.match(e.message, /^options\.timeoutMs could not be read/)
      const proxy = new Proxy({}, { ownKeys() { throw new Error('boom') } })
      e = await rejection(fg.acquireLock('n', proxy))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      assert.match(e.message, /^options could not be read/)
      const ids = ['a', 'b']
      Object.defineProperty(ids, 1, { get() { throw new Error('boom') } })
      e = await rejection(fg.claimMany('g', ids))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      assert.match(e.message, /^ids\[1\] could not be read/)
      assert.equal((await fg.getLock('n')).fence, 0)
      assert.equal((await fg.listItems('g')).counts.total, 0)
    })

    if (b.name === 'embedded') {
      test('_claimNow checks its output buffer before it claims', async () => {
        // The native client itself: the public class keeps it private.
        const fg = await Native.open({ prefix: freshPrefix('claimNow') })
        for (const out of [new Float64Array(5), new Float32Array(70), [], null]) {
          assert.throws(() => fg._claimNow(out, 'g', 'a'), (e) => e.code === 'ERR_INVALID_ARGUMENT' && /^out /.test(e.message))
        }
        assert.equal((await fg.getItem('g', 'a')).status, 'none')
        const out = new Float64Array(70)
        assert.equal(typeof fg._claimNow(out, 'g', 'a'), 'string') // the owner token: claimed
        assert.equal(out[0], 1)
      })
    }
  })
}
