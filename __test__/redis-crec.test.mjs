// tracker_crec.lua (docs/redis-compact.md, "Record buckets"): records in small hashes addressed by
// linear hashing, run through a small dispatcher script against a throwaway redis-server of this
// suite's own and checked against a JavaScript model (a Map, and the buckets, level, split
// pointer and bucket expiries the design implies) over seeded random operations: every reply,
// and every so often the whole keyspace: each bucket's records and expiry, the count, where
// every record lives, bucket sizes and their listpack encoding.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { connect } from './resp.mjs'
import { mulberry32 as prng } from './prng.mjs'
import { freePort, haveRedis, startRedis, stopRedis } from './redis-server.mjs'
import { idHash as fnv1a } from './redis-layout.mjs'

const skip = !haveRedis && 'redis-server is not installed'
let server, r

const LIB = readFileSync(new URL('../crates/core/src/backend/redis/lua/tracker_crec.lua', import.meta.url), 'utf8')
// KEYS[1] the tree hash, KEYS[2] the bucket prefix; ARGV[1] the operation. A record is dead when
// its first byte is 'D' (the tracker's is_dead tests the record's expiry instead).
const DISPATCH = `
local crec = crec_lib()
-- The linear-hashing state is the caller's to keep (the tracker keeps it in its bookkeeping):
-- this dispatcher keeps it in the hash KEYS[1], one HMGET and at most one HSET per call.
local v = redis.call('HMGET', KEYS[1], 'k', 's', 'n')
local st = crec.open(KEYS[2], function(raw) return string.byte(raw, 1) == 68 end,
  {k = tonumber(v[1]) or 0, s = tonumber(v[2]) or 0, n = tonumber(v[3]) or 0})
local op, out = ARGV[1], nil
if op == 'set' then -- t, then id h raw triples: per set 1 new + 2 split
  local t = tonumber(ARGV[2])
  out = {}
  for i = 3, #ARGV, 3 do
    local new, split = crec.set(st, ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], t)
    out[#out + 1] = (new and 1 or 0) + (split and 2 or 0)
  end
elseif op == 'set_many' then -- id h raw t quadruples
  local ids, hs, raws, ts = {}, {}, {}, {}
  for i = 2, #ARGV, 4 do
    ids[#ids + 1] = ARGV[i]; hs[#hs + 1] = tonumber(ARGV[i + 1]); raws[#raws + 1] = ARGV[i + 2]; ts[#ts + 1] = tonumber(ARGV[i + 3])
  end
  out = crec.set_many(st, ids, hs, raws, ts)
elseif op == 'get' then
  out = crec.get(st, ARGV[2], tonumber(ARGV[3]))
elseif op == 'mget' or op == 'del_many' then -- id h pairs
  local ids, hs = {}, {}
  for i = 2, #ARGV, 2 do ids[#ids + 1] = ARGV[i]; hs[#hs + 1] = tonumber(ARGV[i + 1]) end
  if op == 'mget' then out = crec.mget(st, ids, hs) else out = crec.del_many(st, ids, hs) end
elseif op == 'del' then
  out = crec.del(st, ARGV[2], tonumber(ARGV[3]))
elseif op == 'sweep' then
  local nxt, removed = crec.sweep(st, tonumber(ARGV[2]))
  out = {nxt, removed}
elseif op == 'fnv' then
  out = {}
  for i = 2, #ARGV do out[#out + 1] = crec.fnv1a(ARGV[i]) end
elseif op == 'fnvhex' then -- bytes given as hex, so any byte reaches Lua (RESP sends UTF-8 here)
  out = {}
  for i = 2, #ARGV do
    local s = string.gsub(ARGV[i], '%x%x', function(x) return string.char(tonumber(x, 16)) end)
    out[#out + 1] = crec.fnv1a(s)
  end
end
if crec.save(st) then
  redis.call('HSET', KEYS[1], 'k', string.format('%d', st.k), 's', string.format('%d', st.s), 'n', string.format('%d', st.n))
end
return out
`
const SCRIPT = `${LIB}\n${DISPATCH}`
let sha

before(async () => {
  if (skip) return
  const port = await freePort()
  server = await startRedis(port)
  r = await connect(`redis://127.0.0.1:${port}`)
  sha = await r.call('SCRIPT', 'LOAD', SCRIPT)
})
after(async () => {
  r?.close()
  await stopRedis(server)
})

const run = (tree, prefix, ...args) => r.call('EVALSHA', sha, 2, tree, prefix, ...args)

const LOAD = 40
const CHARS = ['a', 'z', '0', '-', ':', '\0', 'é', 'ß', '日', '本', '😀', '\u0080', '\u07ff', '\uffff']

/** Random ids of the kinds a tracker sees: sequential, tiny (with NULs), non-ASCII, long. */
function makeIds(rand, count, maxLong) {
  const ids = new Set()
  const pick = (a) => a[Math.floor(rand() * a.length)]
  while (ids.size < count) {
    const kind = rand()
    let id
    if (kind < 0.4) id = `order-${String(ids.size).padStart(7, '0')}`
    else if (kind < 0.55) id = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(CHARS)).join('')
    else if (kind < 0.85) id = Array.from({ length: 4 + Math.floor(rand() * 16) }, () => pick(CHARS)).join('')
    else {
      // Long: up to maxLong bytes of UTF-8.
      const want = 20 + Math.floor(rand() * (maxLong - 20))
      id = ''
      while (Buffer.byteLength(id) < want - 4) id += rand() < 0.8 ? String.fromCharCode(97 + Math.floor(rand() * 26)) : pick(CHARS)
    }
    ids.add(id)
  }
  return [...ids]
}

/**
 * The model: records (id -> {h, raw}), the buckets (number -> Set of ids) and their expiries as
 * the library's contract implies them, level k, split pointer s.
 */
class Model {
  constructor() {
    this.recs = new Map()
    this.live = [] // the ids of recs, in any order: a uniform pick in O(1)
    this.at = new Map() // id -> its position in live
    this.buckets = new Map()
    this.exp = new Map()
    this.k = 0
    this.s = 0
    this.splits = 0
    this.maxSize = 0 // the largest any bucket has been
  }
  get m() { return 2 ** this.k }
  get count() { return this.m + this.s }
  addr(h) {
    let b = h % this.m
    if (b < this.s) b = h % (2 * this.m)
    return b
  }
  bucket(b) {
    let set = this.buckets.get(b)
    if (!set) this.buckets.set(b, (set = new Set()))
    return set
  }
  forget(id) {
    this.recs.delete(id)
    const i = this.at.get(id)
    const last = this.live.pop()
    if (last !== id) { this.live[i] = last; this.at.set(last, i) }
    this.at.delete(id)
  }
  // A bucket emptied is a key Redis dropped, with its TTL.
  drop(b, id) {
    const set = this.buckets.get(b)
    set.delete(id)
    if (set.size === 0) { this.buckets.delete(b); this.exp.delete(b) }
  }
  // A write that makes bucket b live until at least t: GT, or NX for a key without a TTL.
  touch(b, t) {
    const cur = this.exp.get(b)
    this.exp.set(b, cur === undefined ? t : Math.max(cur, t))
  }
  set(id, h, raw, t) {
    const b = this.addr(h)
    const isNew = !this.recs.has(id)
    if (isNew) { this.at.set(id, this.live.length); this.live.push(id) }
    this.recs.set(id, { h, raw })
    this.bucket(b).add(id)
    this.maxSize = Math.max(this.maxSize, this.bucket(b).size)
    this.touch(b, t)
    if (!isNew) return 0
    if (this.recs.size > LOAD * this.count) { this.split(t); return 3 }
    return 1
  }
  /** crec.set_many: every record written to the bucket its hash addresses now (each bucket's
   * expiry at its latest record's), then the splits the new ones call for (at most one per
   * LOAD of them, and one more), each at the batch's latest expiry. */
  setMany(list) {
    let added = 0
    const latest = new Map()
    for (const [id, h, raw, t] of list) {
      const b = this.addr(h)
      if (!this.recs.has(id)) { this.at.set(id, this.live.length); this.live.push(id); added++ }
      this.recs.set(id, { h, raw })
      this.bucket(b).add(id)
      this.maxSize = Math.max(this.maxSize, this.bucket(b).size)
      latest.set(b, Math.max(latest.get(b) ?? 0, t))
    }
    for (const [b, t] of latest) this.touch(b, t)
    const t = Math.max(...list.map((e) => e[3]))
    let splits = Math.ceil(added / LOAD) + 1
    let done = 0
    while (splits > 0 && this.recs.size > LOAD * this.count) { this.split(t); splits--; done++ }
    return [added, done]
  }
  split(t) {
    const { s, m } = this
    const src = this.buckets.get(s) ?? new Set()
    const srcExp = this.exp.get(s)
    let moved = 0
    for (const id of [...src]) {
      const { h, raw } = this.recs.get(id)
      if (raw[0] === 'D') {
        this.forget(id)
        this.drop(s, id)
      } else if (h % (2 * m) === s + m) {
        this.drop(s, id)
        this.bucket(s + m).add(id)
        moved++
      }
    }
    if (moved) this.touch(s + m, Math.max(t, srcExp))
    this.splits++
    this.s++
    if (this.s === m) { this.k++; this.s = 0 }
  }
  get(id) { return this.recs.get(id)?.raw ?? null }
  del(id) {
    const rec = this.recs.get(id)
    if (!rec) return 0
    this.drop(this.addr(rec.h), id)
    this.forget(id)
    return 1
  }
  sweep(cursor) {
    const c = cursor >= this.count ? 0 : cursor
    let removed = 0
    for (const id of [...(this.buckets.get(c) ?? [])]) {
      if (this.recs.get(id).raw[0] === 'D') { this.forget(id); this.drop(c, id); removed++ }
    }
    return [c + 1 >= this.count ? 0 : c + 1, removed]
  }
}

/** Reads the tree hash's k, s, n (absent: 0) and the other fields. */
async function treeState(tree) {
  const [k, s, n] = await r.call('HMGET', tree, 'k', 's', 'n')
  return { k: Number(k ?? 0), s: Number(s ?? 0), n: Number(n ?? 0) }
}

/**
 * The whole keyspace against the model: the tree hash, every bucket's records, address, size,
 * encoding and expiry, no stray bucket. Returns the largest bucket and the encodings seen.
 */
async function verify(model, tree, prefix, stats) {
  const st = await treeState(tree)
  assert.deepEqual(st, { k: model.k, s: model.s, n: model.recs.size }, 'tree state')
  assert.equal(await r.call('HGET', tree, 'top'), '7168', 'other fields of the tree hash untouched')
  assert.equal(await r.call('HGET', tree, '1024'), '12', 'other fields of the tree hash untouched')
  const keys = await r.scanAll(`${prefix}*`)
  assert.deepEqual(keys.map((k) => Number(k.slice(prefix.length))).sort((a, b) => a - b),
    [...model.buckets.keys()].sort((a, b) => a - b), 'the bucket keys are the non-empty buckets')
  let total = 0
  for (const [b, ids] of model.buckets) {
    assert.ok(b < model.count, `bucket ${b} below the bucket count ${model.count}`)
    const key = `${prefix}${b}`
    const flat = await r.call('HGETALL', key)
    const got = new Map()
    for (let i = 0; i < flat.length; i += 2) got.set(flat[i], flat[i + 1])
    assert.equal(got.size, ids.size, `bucket ${b} size`)
    for (const [id, raw] of got) {
      assert.equal(model.addr(fnv1a(id)), b, `${JSON.stringify(id)} lives in the bucket its hash addresses`)
      assert.equal(raw, model.get(id), `record of ${JSON.stringify(id)}`)
    }
    total += got.size
    stats.maxBucket = Math.max(stats.maxBucket, got.size)
    const enc = await r.call('OBJECT', 'ENCODING', key)
    stats.encodings[enc] = (stats.encodings[enc] ?? 0) + 1
    // An id over 64 bytes (hash-max-listpack-value) makes its bucket a hashtable for good (seed
    // 3 has such ids: there it is only counted).
    if (!stats.longIds) assert.equal(enc, 'listpack', `bucket ${b} of ${got.size} records is ${enc}`)
    assert.equal(await r.call('PEXPIRETIME', key), model.exp.get(b), `bucket ${b} expiry`)
  }
  assert.equal(total, st.n, 'n is the total size of the buckets')
}

/**
 * One seeded run of random operations; returns counts. `grow`: the share of sets that write an id
 * not written before (the rest overwrite one); `dels`: the share of operations that delete.
 */
async function randomRun(seed, { ops, pool, maxLong, grow, dels }) {
  const rand = prng(seed)
  const tree = `crec:${seed}:ct`
  const prefix = `crec:${seed}:cb:`
  // Other code's fields of the tree hash: never touched.
  await r.call('HSET', tree, 'top', '7168', '1024', '12')
  const ids = makeIds(rand, pool, maxLong)
  const hash = new Map(ids.map((id) => [id, fnv1a(id)]))
  const model = new Model()
  const base = Date.now() + 86_400_000
  const stats = { maxBucket: 0, encodings: {}, sets: 0, splits: 0, dropped: 0, checks: 0,
    longIds: ids.filter((id) => Buffer.byteLength(id) > 64).length }
  // Any id of the pool (mostly absent), or one with a record (uniformly: deletes must not favour
  // small buckets, which would pile records into the buckets waiting for their split).
  const pick = () => ids[Math.floor(rand() * ids.length)]
  const known = () => (model.live.length === 0 ? pick() : model.live[Math.floor(rand() * model.live.length)])
  let fresh = 0 // ids[fresh..] were never written
  let cursor = 0
  for (let op = 0; op < ops; op++) {
    const x = rand()
    if (x < 0.05) {
      // A batch written at once (tracker_common.lua, compact_staged): distinct ids, each its own
      // expiry, one HSET per bucket.
      const list = []
      const seen = new Set()
      for (let i = 5 + Math.floor(rand() * 115); i > 0; i--) {
        const id = rand() < grow && fresh < ids.length ? ids[fresh++] : rand() < 0.8 ? known() : pick()
        if (seen.has(id)) continue
        seen.add(id)
        const raw = (rand() < 0.15 ? 'D' : 'L') + `${op}:m${i}:`.padEnd(41, 'x')
        list.push([id, hash.get(id), raw, base + Math.floor(rand() * 1_000_000)])
      }
      const before = model.recs.size
      const [added, splits] = model.setMany(list)
      stats.dropped += before + added - model.recs.size
      stats.splits += splits
      stats.sets += list.length
      stats.many = (stats.many ?? 0) + 1
      assert.equal(await run(tree, prefix, 'set_many', ...list.flat()), added, `op ${op}: set_many`)
    } else if (x < 0.6) {
      // A set of 1 id, sometimes a batch of up to 5 in one script (each at most one split).
      const batch = rand() < 0.9 ? 1 : 2 + Math.floor(rand() * 4)
      const t = base + Math.floor(rand() * 1_000_000)
      const args = []
      const want = []
      for (let i = 0; i < batch; i++) {
        const id = rand() < grow && fresh < ids.length ? ids[fresh++] : rand() < 0.8 ? known() : pick()
        const raw = (rand() < 0.15 ? 'D' : 'L') + `${op}:${i}:`.padEnd(41, 'x')
        assert.equal(raw.length, 42)
        const before = model.recs.size
        want.push(model.set(id, hash.get(id), raw, t))
        stats.dropped += before + (want.at(-1) & 1) - model.recs.size
        args.push(id, hash.get(id), raw)
      }
      const before = await treeState(tree)
      assert.deepEqual(await run(tree, prefix, 'set', t, ...args), want, `op ${op}: set`)
      const after = await treeState(tree)
      // Timing-free bound: each set splits one bucket at most.
      const grew = 2 ** after.k + after.s - (2 ** before.k + before.s)
      assert.ok(grew >= 0 && grew <= want.filter((w) => w & 1).length, `op ${op}: ${grew} splits for ${batch} sets`)
      stats.sets += batch
    } else if (x < 0.96 - dels) {
      if (rand() < 0.5) {
        const id = rand() < 0.7 ? known() : pick()
        assert.equal(await run(tree, prefix, 'get', id, hash.get(id)), model.get(id), `op ${op}: get`)
      } else {
        const list = Array.from({ length: 1 + Math.floor(rand() * 30) }, () => (rand() < 0.7 ? known() : pick()))
        const got = await run(tree, prefix, 'mget', ...list.flatMap((id) => [id, hash.get(id)]))
        assert.deepEqual(got, list.map((id) => model.get(id)), `op ${op}: mget`)
      }
    } else if (x < 0.96) {
      if (rand() < 0.6) {
        const id = rand() < 0.8 ? known() : pick()
        assert.equal(await run(tree, prefix, 'del', id, hash.get(id)), model.del(id), `op ${op}: del`)
      } else {
        // With repeats now and then: HDEL counts a field once.
        const list = Array.from({ length: 1 + Math.floor(rand() * 8) }, () => (rand() < 0.8 ? known() : pick()))
        const want = list.reduce((n, id) => n + model.del(id), 0)
        assert.equal(await run(tree, prefix, 'del_many', ...list.flatMap((id) => [id, hash.get(id)])), want, `op ${op}: del_many`)
      }
    } else {
      // A sweep step; now and then from a cursor past the last bucket (wraps to 0).
      const from = rand() < 0.05 ? model.count + 3 : cursor
      const want = model.sweep(from)
      const got = await run(tree, prefix, 'sweep', from)
      assert.deepEqual(got, want, `op ${op}: sweep ${from}`)
      stats.dropped += want[1]
      cursor = got[0]
    }
    if (op % 2500 === 2499 || op === ops - 1) {
      await verify(model, tree, prefix, stats)
      stats.checks++
    }
  }
  stats.splits = model.splits
  stats.maxEver = model.maxSize
  stats.records = model.recs.size
  stats.k = model.k
  stats.s = model.s
  stats.buckets = model.count
  return stats
}

test('crec.fnv1a is 32-bit FNV-1a of the bytes, for any byte', { skip }, async () => {
  // Published vectors.
  assert.deepEqual(await run('x', 'y', 'fnv', '', 'a', 'foobar'), [0x811c9dc5, 0xe40c292c, 0xbf9cf968])
  const rand = prng(7)
  const pick = (a) => a[Math.floor(rand() * a.length)]
  let checked = 0
  for (let round = 0; round < 10; round++) {
    // UTF-8 text (NUL, 2-, 3- and 4-byte characters), lengths 0..300.
    const texts = Array.from({ length: 200 }, () => Array.from({ length: Math.floor(rand() * (rand() < 0.9 ? 24 : 300)) }, () => pick(CHARS)).join(''))
    assert.deepEqual(await run('x', 'y', 'fnv', ...texts), texts.map(fnv1a))
    // Any bytes (0x00..0xff, not valid UTF-8), through hex.
    const bufs = Array.from({ length: 200 }, () => Buffer.from(Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256))))
    assert.deepEqual(await run('x', 'y', 'fnvhex', ...bufs.map((b) => b.toString('hex'))), bufs.map(fnv1a))
    checked += 400
  }
  // Every single byte, and runs of 0xff (products at their largest).
  const singles = Array.from({ length: 256 }, (_, i) => Buffer.from([i]))
  const runs = Array.from({ length: 40 }, (_, i) => Buffer.alloc(i * 7, 0xff))
  assert.deepEqual(await run('x', 'y', 'fnvhex', ...[...singles, ...runs].map((b) => b.toString('hex'))), [...singles, ...runs].map(fnv1a))
  console.log(`fnv1a: ${checked + 296 + 3} strings match`)
})

for (const [seed, opts] of [
  [1, { ops: 20_000, pool: 16_000, maxLong: 64, grow: 0.8, dels: 0.1 }],
  [2, { ops: 20_000, pool: 12_000, maxLong: 64, grow: 0.5, dels: 0.12 }],
  [3, { ops: 10_000, pool: 6_000, maxLong: 300, grow: 0.8, dels: 0.1 }],
]) {
  test(`random operations against the model (seed ${seed}${opts.maxLong > 64 ? ', ids over 64 bytes' : ''})`, { skip }, async () => {
    const t0 = Date.now()
    const stats = await randomRun(seed, opts)
    console.log(`seed ${seed}: ${JSON.stringify(stats)} in ${Date.now() - t0} ms`)
    assert.ok(stats.splits >= 30, 'the run split buckets')
    // Every bucket, at every moment (the model's buckets are Redis's, as verified).
    assert.ok(stats.maxEver < 128, `largest bucket ever ${stats.maxEver}`)
    assert.ok(stats.dropped > 0, 'dead records were dropped')
    if (opts.maxLong <= 64) assert.deepEqual(Object.keys(stats.encodings), ['listpack'])
    assert.ok(stats.maxBucket < 128, `largest bucket ${stats.maxBucket}`)
  })
}

/** Calls per command since the last CONFIG RESETSTAT (lower-case names; INFO, CONFIG left out). */
async function calls() {
  const text = await r.call('INFO', 'commandstats')
  const out = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (!m[1].startsWith('info') && !m[1].startsWith('config')) out[m[1]] = Number(m[2])
  return out
}

test('loading the library defines crec_lib and runs no command', { skip }, async () => {
  await r.call('CONFIG', 'RESETSTAT')
  // Redis 7 refuses a script that sets a global, or reads one that does not exist (pcall: false).
  const probe = `local function global(name) return (pcall(function() return getfenv(1)[name] end)) end
return type(crec_lib) .. ' ' .. type(crec_lib()) .. ' ' .. tostring(global('LOAD')) .. ' ' .. tostring(global('split'))`
  assert.equal(await r.call('EVAL', `${LIB}\n${probe}`, 0), 'function table false false')
  assert.deepEqual(await calls(), { eval: 1 })
})

test('commands per call: the dispatcher\'s HMGET and HSET of the state, one split per set however far behind', { skip }, async () => {
  const tree = 'crec:bound:ct'
  const prefix = 'crec:bound:cb:'
  const t = Date.now() + 3_600_000
  const ids = Array.from({ length: 190 }, (_, i) => `item-${i}`)
  for (const id of ids) await run(tree, prefix, 'set', t + 1, id, fnv1a(id), 'L'.padEnd(42, 'x'))
  let st = await treeState(tree)
  assert.deepEqual(st, { k: 2, s: 1, n: 190 }) // splits at 41, 81, 121, 161 records: 5 buckets
  const b = (h, { k, s }) => { let x = h % 2 ** k; if (x < s) x = h % 2 ** (k + 1); return x }

  await r.call('CONFIG', 'RESETSTAT')
  assert.equal(await run(tree, prefix, 'get', 'item-3', fnv1a('item-3')), 'L'.padEnd(42, 'x'))
  assert.deepEqual(await calls(), { evalsha: 1, hmget: 1, hget: 1 })

  // A read of ids in every bucket: one HMGET per bucket, none written.
  await r.call('CONFIG', 'RESETSTAT')
  await run(tree, prefix, 'mget', ...ids.slice(0, 40).flatMap((id) => [id, fnv1a(id)]))
  const touched = new Set(ids.slice(0, 40).map((id) => b(fnv1a(id), st))).size
  assert.equal(touched, 5)
  assert.deepEqual(await calls(), { evalsha: 1, hmget: 1 + touched })

  // A new id, later expiry: HSET bucket, PEXPIREAT GT, HSET of n.
  await r.call('CONFIG', 'RESETSTAT')
  assert.deepEqual(await run(tree, prefix, 'set', t + 2, 'new-1', fnv1a('new-1'), 'L'.padEnd(42, 'y')), [1])
  assert.deepEqual(await calls(), { evalsha: 1, hmget: 1, hset: 2, pexpireat: 1 })
  // An overwrite, earlier expiry: GT does nothing, NX does nothing (the key has a TTL), no save.
  await r.call('CONFIG', 'RESETSTAT')
  assert.deepEqual(await run(tree, prefix, 'set', t - 5, 'new-1', fnv1a('new-1'), 'L'.padEnd(42, 'z')), [0])
  assert.deepEqual(await calls(), { evalsha: 1, hmget: 1, hset: 1, pexpireat: 2 })
  assert.equal(await r.call('PEXPIRETIME', `${prefix}${b(fnv1a('new-1'), st)}`), t + 2, 'never shortened')

  // Far behind (the count says 100 per bucket): one set still splits one bucket, no more.
  // (n = 401 > 40 * 5 buckets: the count runs ahead of the buckets by about 3 splits.)
  await r.call('HSET', tree, 'n', '400')
  for (let i = 0; i < 3; i++) {
    const before = await treeState(tree)
    await r.call('CONFIG', 'RESETSTAT')
    assert.deepEqual(await run(tree, prefix, 'set', t, `far-${i}`, fnv1a(`far-${i}`), 'L'.padEnd(42, 'f')), [3])
    const n = await calls()
    st = await treeState(tree)
    assert.equal(2 ** st.k + st.s, 2 ** before.k + before.s + 1, 'one bucket more')
    assert.equal(n.hgetall, 1, `one bucket read: ${JSON.stringify(n)}`)
    assert.equal(n.hmget, 1)
    assert.ok(n.hset <= 3 && (n.hdel ?? 0) <= 1 && n.pexpireat <= 4 && (n.pexpiretime ?? 0) <= 1, JSON.stringify(n))
  }
  assert.deepEqual(st, { k: 3, s: 0, n: 403 })
})

test('a split drops dead records of its bucket, a sweep those of any bucket; a bucket without a TTL gets one', { skip }, async () => {
  const tree = 'crec:dead:ct'
  const prefix = 'crec:dead:cb:'
  const t = Date.now() + 3_600_000
  // 40 records in bucket 0, every third dead.
  const ids = Array.from({ length: 40 }, (_, i) => `d-${i}`)
  for (const [i, id] of ids.entries()) await run(tree, prefix, 'set', t, id, fnv1a(id), (i % 3 ? 'L' : 'D').padEnd(42, 'x'))
  assert.deepEqual(await treeState(tree), { k: 0, s: 0, n: 40 })
  // The 41st splits bucket 0: the 14 dead go, the live ones spread over 0 and 1.
  assert.deepEqual(await run(tree, prefix, 'set', t, 'd-40', fnv1a('d-40'), 'L'.padEnd(42, 'x')), [3])
  assert.deepEqual(await treeState(tree), { k: 1, s: 0, n: 27 })
  const sizes = [Number(await r.call('HLEN', `${prefix}0`)), Number(await r.call('HLEN', `${prefix}1`))]
  assert.equal(sizes[0] + sizes[1], 27)
  for (const id of ids.filter((_, i) => i % 3 === 0)) assert.equal(await run(tree, prefix, 'get', id, fnv1a(id)), null)
  // Mark 5 live ones dead (overwrites), sweep both buckets: they go, the cursor wraps.
  const live = ids.filter((_, i) => i % 3).slice(0, 5)
  for (const id of live) assert.deepEqual(await run(tree, prefix, 'set', t, id, fnv1a(id), 'D'.padEnd(42, 'q')), [0])
  const [c1, r1] = await run(tree, prefix, 'sweep', 0)
  const [c2, r2] = await run(tree, prefix, 'sweep', c1)
  assert.deepEqual([c1, c2, r1 + r2], [1, 0, 5])
  assert.deepEqual(await treeState(tree), { k: 1, s: 0, n: 22 })
  // A bucket whose TTL someone removed gets one with the next write.
  await r.call('PERSIST', `${prefix}0`)
  await r.call('PERSIST', `${prefix}1`)
  const one = (bucket) => { for (let i = 0; ; i++) if (fnv1a(`p-${i}`) % 2 === bucket) return `p-${i}` }
  for (const id of [one(0), one(1)]) await run(tree, prefix, 'set', t + 9, id, fnv1a(id), 'L'.padEnd(42, 'x'))
  assert.equal(await r.call('PEXPIRETIME', `${prefix}0`), t + 9)
  assert.equal(await r.call('PEXPIRETIME', `${prefix}1`), t + 9)
})
