import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import net from 'node:net'
import { backends, Flowguard, rejection } from './backends.mjs'

const TOKEN = 'a'.repeat(32)
const big = 'x'.repeat(1025)
const mustNotRun = () => {
  throw new Error('fn ran although its arguments were bad')
}
/** An array nested `depth` deep: turning it into text overflows the stack. */
const nested = (depth) => {
  let a = []
  for (let i = 0; i < depth; i++) a = [a]
  return a
}

// [description, call(fg), the argument at fault: `error.field`, with which the message starts]
const cases = [
  ['group not a string', (fg) => fg.claim(42, 'a'), 'group'],
  ['group empty', (fg) => fg.claim('', 'a'), 'group'],
  ['group over 1 KiB', (fg) => fg.claim(big, 'a'), 'group'],
  ['id missing', (fg) => fg.claim('g'), 'id'],
  ['id null', (fg) => fg.claim('g', null), 'id'],
  ['id over 1 KiB', (fg) => fg.claim('g', big), 'id'],
  ['timeout zero', (fg) => fg.claim('g', 'a', { timeoutMs: 0 }), 'timeoutMs'],
  ['timeout negative', (fg) => fg.claim('g', 'a', { timeoutMs: -1 }), 'options.timeoutMs'],
  ['timeout NaN', (fg) => fg.claim('g', 'a', { timeoutMs: NaN }), 'options.timeoutMs'],
  ['timeout Infinity', (fg) => fg.claim('g', 'a', { timeoutMs: Infinity }), 'options.timeoutMs'],
  ['timeout absurd', (fg) => fg.claim('g', 'a', { timeoutMs: 1e13 }), 'timeoutMs'],
  ['timeout a string', (fg) => fg.claim('g', 'a', { timeoutMs: '600' }), 'options.timeoutMs'],
  ['reclaimCompleted not boolean', (fg) => fg.claim('g', 'a', { reclaimCompleted: 'yes' }), 'options.reclaimCompleted'],
  ['options not an object', (fg) => fg.claim('g', 'a', 5), 'options'],
  ['ids not an array', (fg) => fg.claimMany('g', 'a,b'), 'ids'],
  ['ids with a number', (fg) => fg.claimMany('g', ['a', 7]), 'ids[1]'],
  ['ids with an empty id', (fg) => fg.claimMany('g', ['a', '']), 'requests[1].id'],
  ['owner of the wrong shape', (fg) => fg.complete('g', 'a', { owner: 'abc' }), 'owner'],
  ['owner upper-case', (fg) => fg.complete('g', 'a', { owner: 'A'.repeat(32) }), 'owner'],
  ['owner a number', (fg) => fg.complete('g', 'a', { owner: 12 }), 'options.owner'],
  ['keepMs zero', (fg) => fg.complete('g', 'a', { keepMs: 0 }), 'keepMs'],
  ['fail without reason', (fg) => fg.fail('g', 'a'), 'reason'],
  ['fail reason too long', (fg) => fg.fail('g', 'a', 'r'.repeat(5000)), 'error'],
  ['setItems not an array', (fg) => fg.setItems('g', {}), 'requests'],
  ['setItems entry not an object', (fg) => fg.setItems('g', ['a']), 'requests[0]'],
  ['setItems unknown status', (fg) => fg.setItems('g', [{ id: 'a', status: 'done' }]), 'requests[0].status'],
  ['setItems status missing', (fg) => fg.setItems('g', [{ id: 'a' }]), 'requests[0].status'],
  ['setItems one bad among good', (fg) => fg.setItems('g', [{ id: 'a', status: 'in_progress' }, { id: 'b', status: 'in_progress', timeoutMs: -5 }]), 'requests[1].timeoutMs'],
  ['getItems ids not array', (fg) => fg.getItems('g', 'a'), 'ids'],
  ['list status unknown', (fg) => fg.listItems('g', { status: 'stale' }), 'status'],
  ['list limit zero', (fg) => fg.listItems('g', { limit: 0 }), 'limit'],
  ['list limit fractional', (fg) => fg.listItems('g', { limit: 1.5 }), 'options.limit'],
  ['list offset negative', (fg) => fg.listItems('g', { offset: -1 }), 'options.offset'],
  ['lock name empty', (fg) => fg.acquireLock(''), 'name'],
  ['lock name not a string', (fg) => fg.acquireLock({}), 'name'],
  ['lock timeout zero', (fg) => fg.acquireLock('n', { timeoutMs: 0 }), 'timeoutMs'],
  ['lock wait negative', (fg) => fg.acquireLock('n', { waitMs: -1 }), 'options.waitMs'],
  ['lock label not a string', (fg) => fg.acquireLock('n', { label: 5 }), 'options.label'],
  ['release token missing', (fg) => fg.releaseLock('n'), 'owner'],
  ['release token wrong shape', (fg) => fg.releaseLock('n', 'xyz'), 'owner'],
  ['extend token wrong shape', (fg) => fg.extendLock('n', 'xyz'), 'owner'],
  ['extend timeout NaN', (fg) => fg.extendLock('n', TOKEN, { timeoutMs: NaN }), 'options.timeoutMs'],
  ['withLock fn missing', (fg) => fg.withLock('n'), 'fn'],
  ['withPermit fn missing', (fg) => fg.withPermit('n', undefined, { permits: 2 }), 'fn'],
  ['withPermit permits missing', (fg) => fg.withPermit('n', mustNotRun, {}), 'options.permits'],
  // The JavaScript helpers: values that cannot even be turned into text (a Symbol, an object
  // without a prototype, an array nested deeper than the stack) are coded errors too.
  ['withLock fn a symbol', (fg) => fg.withLock('n', Symbol('f')), 'fn'],
  ['withLock fn without a prototype', (fg) => fg.withLock('n', Object.create(null)), 'fn'],
  ['withLock name a symbol', (fg) => fg.withLock(Symbol('n'), mustNotRun), 'name'],
  ['withLock options a symbol', (fg) => fg.withLock('n', mustNotRun, Symbol('o')), 'options'],
  ['withLock timeoutMs nested deeply', (fg) => fg.withLock('n', mustNotRun, { timeoutMs: nested(1e5) }), 'options.timeoutMs'],
  ['withLock timeoutMs without a prototype', (fg) => fg.withLock('n', mustNotRun, { timeoutMs: Object.create(null) }), 'options.timeoutMs'],
  ['once fn a symbol', (fg) => fg.once('k', Symbol('f')), 'fn'],
  ['once key a symbol', (fg) => fg.once(Symbol('k'), mustNotRun), 'key'],
  ['once key without a prototype', (fg) => fg.once(Object.create(null), mustNotRun), 'key'],
  ['once options a symbol', (fg) => fg.once('k', mustNotRun, Symbol('o')), 'options'],
  ['once options a number', (fg) => fg.once('k', mustNotRun, 5), 'options'],
  ['once options an array', (fg) => fg.once('k', mustNotRun, [1]), 'options'],
  ['once unknown option', (fg) => fg.once('k', mustNotRun, { ttl: 5 }), 'options'],
  ['once leaseMs a symbol', (fg) => fg.once('k', mustNotRun, { leaseMs: Symbol('l') }), 'leaseMs'],
  ['once leaseMs without a prototype', (fg) => fg.once('k', mustNotRun, { leaseMs: Object.create(null) }), 'leaseMs'],
  ['once leaseMs zero', (fg) => fg.once('k', mustNotRun, { leaseMs: 0 }), 'leaseMs'],
  ['once waitMs without a prototype', (fg) => fg.once('k', mustNotRun, { waitMs: Object.create(null) }), 'waitMs'],
  ['once waitMs negative', (fg) => fg.once('k', mustNotRun, { waitMs: -1 }), 'waitMs'],
  ['once ttlMs nested deeply', (fg) => fg.once('k', mustNotRun, { ttlMs: nested(1e5) }), 'ttlMs'],
  ['once ttlMs a bigint', (fg) => fg.once('k', mustNotRun, { ttlMs: 5n }), 'ttlMs'],
  ['once ttlMs over 365 days', (fg) => fg.once('k', mustNotRun, { ttlMs: 366 * 86400e3 }), 'ttlMs'],
  ['once result nested deeply', (fg) => fg.once('k', () => nested(1e5)), 'result'],
  ['once result a symbol', (fg) => fg.once('k', () => Symbol('r')), 'result'],
  ['setState key a symbol', (fg) => fg.setState(Symbol('k'), 1), 'key'],
  ['setState value a symbol', (fg) => fg.setState('k', Symbol('v')), 'value'],
  ['setState value nested deeply', (fg) => fg.setState('k', nested(1e5)), 'value'],
  ['setState value a bigint inside', (fg) => fg.setState('k', { a: [1n] }), 'value'],
  ['setState options a symbol', (fg) => fg.setState('k', 1, Symbol('o')), 'options'],
  ['setState ttlMs without a prototype', (fg) => fg.setState('k', 1, { ttlMs: Object.create(null) }), 'options.ttlMs'],
  ['getState key a symbol', (fg) => fg.getState(Symbol('k')), 'key'],
  ['getState key without a prototype', (fg) => fg.getState(Object.create(null)), 'key'],
  ['getState key nested deeply', (fg) => fg.getState(nested(1e5)), 'key'],
  ['getStates keys a symbol', (fg) => fg.getStates(Symbol('k')), 'keys'],
  ['getStates keys nested deeply', (fg) => fg.getStates(nested(1e5)), 'keys[0]'],
]

for (const b of backends()) {
  describe(`bad input on ${b.name}`, () => {
    for (const [what, call, field] of cases) {
      test(`${what}: ERR_INVALID_ARGUMENT with field ${field}, nothing written`, async () => {
        const fg = await b.open()
        const e = await rejection(call(fg))
        assert.ok(e instanceof Error)
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
        assert.equal(e.field, field, e.message)
        assert.ok(e.message.startsWith(`${field} `), `message ${JSON.stringify(e.message)} starts with ${field}`)
        const list = await fg.listItems('g')
        assert.equal(list.counts.total, 0)
        assert.equal((await fg.getLock('n')).fence, 0)
      })
    }
    test('an error that is not about one argument has its code and no field', async () => {
      const fg = await b.open()
      await fg.claim('g', 'a')
      const e = await rejection(fg.complete('g', 'a', { owner: TOKEN }))
      assert.equal(e.code, 'ERR_NOT_OWNER', e.message)
      assert.ok(!('field' in e), `field ${e.field}`)
    })
  })
}

describe('opening', () => {
  test('malformed URL: coded error, no echo of the URL', async () => {
    const e = await rejection(Flowguard.open({ url: 'http://user:hunter2@example' }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
    assert.ok(!e.message.includes('hunter2'))
  })
  test('prefix with braces and bad timeouts are refused', async () => {
    assert.equal((await rejection(Flowguard.open({ prefix: 'a{b}' }))).code, 'ERR_INVALID_ARGUMENT')
    assert.match((await rejection(Flowguard.open({ connectTimeoutMs: 0 }))).message, /connectTimeoutMs/)
    assert.match((await rejection(Flowguard.open({ url: 5 }))).message, /url/)
  })
  test('unreachable Redis fails within the connect timeout with ERR_BACKEND_UNAVAILABLE and no password', async () => {
    const t0 = Date.now()
    const e = await rejection(Flowguard.open({ url: 'redis://:s3cret-pw@127.0.0.1:1/0', connectTimeoutMs: 500 }))
    const took = Date.now() - t0
    assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE')
    assert.match(e.message, /127\.0\.0\.1:1/)
    assert.ok(!e.message.includes('s3cret-pw'))
    assert.ok(took < 1500, `failed after ${took} ms`)
  })
  test('a server that accepts but never answers fails within the connect timeout', async () => {
    // A silent TCP server on loopback: the connection opens, the Redis handshake never completes.
    const sockets = []
    const server = net.createServer((s) => sockets.push(s))
    await new Promise((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address()
    try {
      const t0 = Date.now()
      const e = await rejection(Flowguard.open({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300, commandTimeoutMs: 300 }))
      const took = Date.now() - t0
      assert.ok(['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT'].includes(e.code), `${e.code}: ${e.message}`)
      assert.ok(took < 1500, `failed after ${took} ms`)
    } finally {
      sockets.forEach((s) => s.destroy())
      server.close()
    }
  })
  test('the process exits normally with a Redis connection open', { skip: !process.env.REDIS_URL && 'needs REDIS_URL' }, () => {
    const code = `const { Flowguard } = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)});
      Flowguard.open({ url: process.env.REDIS_URL }).then(fg => fg.claim('exit', 'x')).then(r => console.log('done', r.id))`
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 10000, env: process.env })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /done x/)
  })
})

if (process.env.REDIS_URL) {
  describe('secrets', () => {
    test('a wrong password is ERR_BACKEND_AUTH and never echoed', async () => {
      const u = new URL(process.env.REDIS_URL)
      u.username = 'nobody'
      u.password = 'Very-Secret-Pw-123'
      const e = await rejection(Flowguard.open({ url: u.toString() }))
      assert.ok(['ERR_BACKEND_AUTH', 'ERR_BACKEND'].includes(e.code), `${e.code}: ${e.message}`)
      assert.ok(!e.message.includes('Very-Secret-Pw-123'))
      assert.ok(!String(e.stack).includes('Very-Secret-Pw-123'))
    })
  })
}
