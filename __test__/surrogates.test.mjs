// Names with an unpaired UTF-16 surrogate ('\uD800') would become U+FFFD on the way to Rust, so
// distinct names would share state. Every path refuses them with ERR_INVALID_ARGUMENT naming the
// field; well-formed names (U+FFFD itself, astral characters) work and stay distinct.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { backends, Flowguard, rejection } from './backends.mjs'

const fnv1a = createRequire(import.meta.url)('fnv1a')
const TOKEN = 'a'.repeat(32)
const LONE = ['\uD800', 'x\uDFFFy', 'end\uD83D', '\uDE00start']

// [description, call(fg, bad), field named in the message]
const cases = [
  ['claim group', (fg, s) => fg.claim(s, 'a'), 'group'],
  ['claim id', (fg, s) => fg.claim('g', s), 'id'],
  ['complete id', (fg, s) => fg.complete('g', s), 'id'],
  ['complete owner', (fg, s) => fg.complete('g', 'a', { owner: s }), 'options.owner'],
  ['fail reason', (fg, s) => fg.fail('g', 'a', s), 'reason'],
  ['claimMany ids', (fg, s) => fg.claimMany('g', ['ok', s]), 'ids[1]'],
  ['claimBatch ids (JSON fast path)', (fg, s) => fg.claimBatch('g', ['ok', 'ok2', s]), 'ids[2]'],
  ['claimBatch group', (fg, s) => fg.claimBatch(s, ['ok']), 'group'],
  ['setItems id', (fg, s) => fg.setItems('g', [{ id: s, status: 'in_progress' }]), 'requests[0].id'],
  ['setItems error', (fg, s) => fg.setItems('g', [{ id: 'a', status: 'failed', error: s }]), 'requests[0].error'],
  ['getItem id', (fg, s) => fg.getItem('g', s), 'id'],
  ['getItems ids', (fg, s) => fg.getItems('g', [s]), 'ids[0]'],
  ['unsetItem group', (fg, s) => fg.unsetItem(s, 'a'), 'group'],
  ['listItems group', (fg, s) => fg.listItems(s), 'group'],
  ['acquireLock name', (fg, s) => fg.acquireLock(s), 'name'],
  ['acquireLock label', (fg, s) => fg.acquireLock('n', { label: s }), 'options.label'],
  ['releaseLock owner', (fg, s) => fg.releaseLock('n', s), 'owner'],
  ['extendLock name', (fg, s) => fg.extendLock(s, TOKEN), 'name'],
  ['getLock name', (fg, s) => fg.getLock(s), 'name'],
  ['withLock name', (fg, s) => fg.withLock(s, () => 1), 'name'],
  ['enqueue queue', (fg, s) => fg.enqueue(s, 'a'), 'queue'],
  ['enqueue one id', (fg, s) => fg.enqueue('q', s), 'ids'],
  ['enqueue ids', (fg, s) => fg.enqueue('q', ['a', s]), 'ids[1]'],
  ['readBatch queue', (fg, s) => fg.readBatch(s), 'queue'],
  ['ack ids', (fg, s) => fg.ack('q', TOKEN, [s]), 'ids[0]'],
  ['release owner', (fg, s) => fg.release('q', s, ['a']), 'owner'],
  ['peek queue', (fg, s) => fg.peek(s), 'queue'],
  ['queueSize queue', (fg, s) => fg.queueSize(s), 'queue'],
  ['getState key', (fg, s) => fg.getState(s), 'keys[0]'],
  ['getStates keys', (fg, s) => fg.getStates(['k', s]), 'keys[1]'],
  ['setState key', (fg, s) => fg.setState(s, 1), 'key'],
  ['setStateJson text', (fg, s) => fg.setStateJson('k', `"${s}"`), 'value'],
  ['deleteState key', (fg, s) => fg.deleteState(s), 'key'],
  ['increment key', (fg, s) => fg.increment(s), 'key'],
  ['claimKey key', (fg, s) => fg.claimKey(s), 'key'],
  ['completeKey key', (fg, s) => fg.completeKey(s, TOKEN, '1'), 'key'],
  ['releaseKey owner', (fg, s) => fg.releaseKey('k', s), 'owner'],
  ['once key', (fg, s) => fg.once(s, () => 1), 'key'],
]

for (const b of backends()) {
  describe(`unpaired surrogates on ${b.name}`, () => {
    for (const [what, call, field] of cases) {
      test(`${what}: ERR_INVALID_ARGUMENT naming ${field}`, async () => {
        const fg = await b.open()
        for (const s of LONE) {
          const e = await rejection(call(fg, s))
          assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
          assert.ok(e.message.startsWith(`${field} `), `message ${JSON.stringify(e.message)} names ${field}`)
          assert.match(e.message, /unpaired UTF-16 surrogate/)
        }
        // Nothing was written by any refused call.
        assert.equal((await fg.listItems('g')).counts.total, 0)
        assert.equal((await fg.queueSize('q')).waiting, 0)
        assert.equal((await fg.getLock('n')).fence, 0)
      })
    }

    test('U+FFFD and astral names are accepted and stay distinct', async () => {
      const fg = await b.open()
      const names = ['\uFFFD', '\uD83D\uDE00', '\uD83D\uDE01', 'a\uFFFDb']
      for (const n of names) {
        assert.equal((await fg.claim(n, n)).claimed, true)
        assert.equal((await fg.acquireLock(n)).acquired, true)
        await fg.setState(n, n)
      }
      for (const n of names) {
        assert.equal((await fg.getItem(n, n)).status, 'in_progress')
        assert.equal((await fg.getItem(n, n)).id, n)
        assert.equal((await fg.getLock(n)).name, n)
        assert.equal(await fg.getState(n), n)
        assert.equal((await fg.listItems(n)).counts.total, 1)
      }
      const r = await fg.claimBatch('astral', names)
      assert.equal(r.claimed, names.length)
    })
  })
}

describe('Flowguard.shardOf', () => {
  test('matches the npm fnv1a package for well-formed strings', () => {
    const ids = ['', 'a', 'product-id-1', 'ü€😀', '\uFFFD', 'x'.repeat(1000), '\uD83D\uDE00\uD83D\uDE01']
    for (const id of ids) {
      for (const shards of [1, 2, 7, 1024]) {
        assert.equal(Flowguard.shardOf(id, shards), fnv1a(id) % shards, `${JSON.stringify(id)} % ${shards}`)
      }
    }
  })
  test('refuses an unpaired surrogate instead of hashing something else', () => {
    for (const s of LONE) {
      assert.throws(() => Flowguard.shardOf(s, 4), (e) => e.code === 'ERR_INVALID_ARGUMENT' && /^id /.test(e.message))
    }
  })
})
