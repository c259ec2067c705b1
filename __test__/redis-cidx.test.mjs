// The compact completed index (crates/core/src/backend/redis/lua/tracker_cidx.lua, see
// docs/redis-compact.md) run through a small dispatcher script against a redis-server of this
// suite's own, checked against a JavaScript model (an array sorted by expiry, then by the id's
// bytes) on seeded random operations: adds (mostly in expiry order, some out of order, batches of
// equal expiries, ids with NULs, ids that are prefixes of others, multi-byte UTF-8), removes of
// present and absent entries, purges, counts, ranks and pages. After each batch of steps the
// structure itself is checked: leaves of at most LEAF members kept as listpacks, each with a TTL
// and inside its bounds, no key the root does not name, and the Fenwick tree equal, node by node,
// to one recomputed from the leaves' sizes.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { connect } from './resp.mjs'
import { mulberry32 as prng } from './prng.mjs'
import { freePort, haveRedis, startRedis, stopRedis } from './redis-server.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const here = path.dirname(fileURLToPath(import.meta.url))
const LIB = fs.readFileSync(path.join(here, '../crates/core/src/backend/redis/lua/tracker_cidx.lua'), 'utf8')
const LEAF = 96
const NEVER = 99999999999999

// KEYS: root, tree, leaf prefix. ARGV: op, gap ('' = the default), then the op's arguments.
const DISPATCH = `
local cidx = cidx_lib()
local st = cidx.open(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]))
local op = ARGV[1]
if op == 'add' then -- (x, id, keep_until) triples
  local dropped = 0
  for i = 3, #ARGV, 3 do dropped = dropped + cidx.add(st, tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2])) end
  return dropped
elseif op == 'append' then -- (id, x) pairs, in order, above every entry
  local flat = {}
  for i = 3, #ARGV, 2 do flat[#flat + 1] = ARGV[i]; flat[#flat + 1] = tonumber(ARGV[i + 1]) end
  cidx.append(st, flat)
  return 0
elseif op == 'remove' then return cidx.remove(st, tonumber(ARGV[3]), ARGV[4])
elseif op == 'count' then return cidx.count(st)
elseif op == 'expired' then return cidx.expired(st, tonumber(ARGV[3]))
elseif op == 'range' then return cidx.range(st, tonumber(ARGV[3]), tonumber(ARGV[4]))
elseif op == 'pop' then
  local ids, dropped = cidx.pop_expired(st, tonumber(ARGV[3]), tonumber(ARGV[4]))
  return {ids, dropped}
elseif op == 'head' then return cidx.head(st)
elseif op == 'tail' then return cidx.tail(st)
end
return redis.error_reply('unknown op ' .. op)
`

// Everything the checks read, in one call: the root's members, then per leaf its entries, PTTL and
// encoding, then the tree hash.
const DUMP = `
local root = redis.call('ZRANGE', KEYS[1], 0, -1)
local leaves = {}
for i, m in ipairs(root) do
  local lk = KEYS[3] .. string.match(m, '(%d+)$')
  leaves[i] = {redis.call('ZRANGE', lk, 0, -1, 'WITHSCORES'), redis.call('PTTL', lk), redis.call('OBJECT', 'ENCODING', lk) or ''}
end
return {root, leaves, redis.call('HGETALL', KEYS[2])}
`

let server, r, sha, dumpSha
before(async () => {
  if (skip) return
  const port = await freePort()
  server = await startRedis(port)
  r = await connect(`redis://127.0.0.1:${port}`)
  sha = await r.call('SCRIPT', 'LOAD', LIB + DISPATCH)
  dumpSha = await r.call('SCRIPT', 'LOAD', DUMP)
})
after(async () => {
  r?.close()
  await stopRedis(server)
})


/** One index: its keys, its gap, and calls of the library through the dispatcher. */
async function index(name, gap = '') {
  const keys = [`cidx:{${name}}:cr:1`, `cidx:{${name}}:ct:1`, `cidx:{${name}}:cl:1:`]
  await r.call('HSET', keys[1], ...Object.entries(FOREIGN).flat())
  const ev = (op, ...args) => r.call('EVALSHA', sha, 3, ...keys, op, String(gap), ...args)
  return {
    keys,
    gap,
    add: (entries, keepUntil = Date.now() + 3_600_000) => ev('add', ...entries.flatMap(([x, id]) => [x, id, keepUntil])),
    append: (entries) => ev('append', ...entries.flatMap(([x, id]) => [id, x])),
    remove: (x, id) => ev('remove', x, id),
    count: () => ev('count'),
    expired: (now) => ev('expired', now),
    range: (first, n) => ev('range', first, n),
    pop: (now, max) => ev('pop', now, max),
    head: () => ev('head'),
    tail: () => ev('tail'),
  }
}

/** The model: entries {x, id, buf, gone} sorted by x, then by the id's UTF-8 bytes. `gone`: the
 * number of the leaf whose key was deleted under it (its entries are counted but unreadable). */
class Model {
  constructor() { this.a = []; this.ids = new Map() }
  static cmp(p, q) { return p.x - q.x || Buffer.compare(p.buf, q.buf) }
  /** The index where (x, id) is or would go. */
  at(x, buf) {
    let lo = 0, hi = this.a.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (Model.cmp(this.a[mid], { x, buf }) < 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }
  add(x, id) {
    const e = { x, id, buf: Buffer.from(id, 'utf8'), gone: undefined }
    this.a.splice(this.at(x, e.buf), 0, e)
    this.ids.set(id, e)
  }
  remove(x, id) {
    const e = this.ids.get(id)
    if (!e || e.x !== x || e.gone !== undefined) return 0
    this.a.splice(this.at(x, e.buf), 1)
    this.ids.delete(id)
    return 1
  }
  get count() { return this.a.length }
  expired(now) { return this.at(Math.floor(now) + 0.5, Buffer.alloc(0)) }
  range(first, n) {
    return this.a.slice(first, first + n).filter((e) => e.gone === undefined).flatMap((e) => [e.id, e.x])
  }
  /** As pop_expired: live entries up to max and while x <= now; a gone leaf's entries dropped whole. */
  pop(now, max) {
    const ids = []
    let done = 0, dropped = 0
    while (done < max && this.a.length > 0) {
      const e = this.a[0]
      if (e.gone !== undefined) {
        let c = 0
        while (c < this.a.length && this.a[c].gone === e.gone) this.ids.delete(this.a[c++].id)
        this.a.splice(0, c)
        dropped += c
        done += c
        continue
      }
      if (e.x > now) break
      ids.push(e.id)
      this.ids.delete(e.id)
      this.a.shift()
      done++
    }
    return [ids, dropped]
  }
  /** Drops the entries of gone leaf `leaf` (a later add found its key empty); returns how many. */
  drop(leaf) {
    const keep = this.a.filter((e) => e.gone !== leaf)
    const n = this.a.length - keep.length
    for (const e of this.a) if (e.gone === leaf) this.ids.delete(e.id)
    this.a = keep
    return n
  }
}

/** A root member: [bound x, bound id, leaf number]. */
function parseMember(m) {
  const g = /^([\s\S]*)\0\0(\d+)$/.exec(m)
  assert.ok(g, `root member ${JSON.stringify(m)}`)
  const key = g[1].replace(/\0\x01/g, '\0')
  assert.ok(!/\0(?!\x01)/.test(g[1]), `a NUL of the bound is escaped: ${JSON.stringify(m)}`)
  return [Number(key.slice(0, 15)), key.slice(15), Number(g[2])]
}

const lowbit = (i) => i & -i
/** Fields of the tree hash that belong to other code (crec's, the group's generation). */
const FOREIGN = { k: '3', s: '1', n: '7', gen: '1700000000000000' }

/**
 * Checks the structure against the model: bounds in order, each leaf's entries inside them and
 * their concatenation the model's live entries, leaves of at most LEAF members (counted when
 * over: no free split number) kept as listpacks, every leaf with a TTL, no leaf key the root does
 * not name, the tree's nodes those of a Fenwick tree over the leaves' sizes (none 0, none above
 * top) and its other fields untouched. Returns the number of leaves over LEAF.
 */
async function check(ix, model, { allowGone = false, grown = false } = {}) {
  const [root, leaves, flat] = await r.call('EVALSHA', dumpSha, 3, ...ix.keys)
  const parsed = root.map(parseMember)
  const sizes = new Map()
  let over = 0
  const live = []
  for (let i = 0; i < parsed.length; i++) {
    const [bx, bid, n] = parsed[i]
    const [entries, pttl, enc] = leaves[i]
    if (i > 0) assert.ok(n > parsed[i - 1][2], `leaf numbers follow the bounds: ${parsed[i - 1][2]}, ${n}`)
    if (entries.length === 0) {
      assert.ok(allowGone, `leaf ${n} named by the root has no key`)
      sizes.set(n, model.a.filter((e) => e.gone === n).length)
      continue
    }
    sizes.set(n, entries.length / 2)
    assert.ok(pttl > 0, `leaf ${n} has a TTL (${pttl})`)
    if (entries.length / 2 > LEAF) over++
    // (`grown`: leaves may have passed 128 entries, with no number to split into, and shrunk
    // since: Redis keeps such a sorted set a skiplist.)
    if (entries.length / 2 <= 128 && !grown) assert.equal(enc, 'listpack', `leaf ${n} of ${entries.length / 2}`)
    const bound = { x: bx, buf: Buffer.from(bid, 'utf8') }
    const next = parsed[i + 1] && { x: parsed[i + 1][0], buf: Buffer.from(parsed[i + 1][1], 'utf8') }
    for (let k = 0; k < entries.length; k += 2) {
      const e = { x: Number(entries[k + 1]), id: entries[k], buf: Buffer.from(entries[k], 'utf8') }
      assert.ok(Model.cmp(e, bound) >= 0, `leaf ${n}: ${JSON.stringify(e.id)} below its bound`)
      if (next) assert.ok(Model.cmp(e, next) < 0, `leaf ${n}: ${JSON.stringify(e.id)} at or above the next bound`)
      live.push(e.id, e.x)
    }
  }
  assert.deepEqual(live, model.range(0, model.count), 'the leaves in order hold the model\'s entries')
  const keys = (await r.scanAll(`${ix.keys[2]}*`)).sort()
  const named = parsed.filter((_, i) => leaves[i][0].length > 0).map(([, , n]) => `${ix.keys[2]}${n}`).sort()
  assert.deepEqual(keys, named, 'every leaf key is named by the root')
  // The tree: recomputed from the sizes (BigInt: numbers pass 2^31).
  const tree = new Map()
  for (let i = 0; i < flat.length; i += 2) tree.set(flat[i], flat[i + 1])
  for (const [f, v] of Object.entries(FOREIGN)) assert.equal(tree.get(f), v, `foreign field ${f}`)
  const top = BigInt(tree.get('top') ?? 0)
  const want = new Map()
  for (const [n, c] of sizes) {
    assert.ok(BigInt(n) <= top, `leaf ${n} above top ${top}`)
    for (let u = BigInt(n); u <= top; u += lowbit(u)) want.set(u, (want.get(u) ?? 0) + c)
  }
  const got = new Map()
  for (const [f, v] of tree) {
    if (/^\d+$/.test(f)) got.set(BigInt(f), Number(v))
    else assert.ok(f === 'top' || f in FOREIGN, `field ${JSON.stringify(f)}`)
  }
  for (const [u, v] of got) assert.ok(v !== 0 && u <= top, `node ${u} = ${v} (top ${top})`)
  const wanted = new Map([...want].filter(([, v]) => v !== 0))
  assert.deepEqual(new Map([...got].sort((p, q) => (p[0] < q[0] ? -1 : 1))), new Map([...wanted].sort((p, q) => (p[0] < q[0] ? -1 : 1))), 'Fenwick nodes')
  assert.equal(await ix.count(), model.count, 'count')
  return over
}

/** Unique ids of many shapes, at most 64 bytes (a listpack's limit): NULs, prefixes, UTF-8. */
function idMaker(rnd) {
  let n = 0
  const pool = []
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)]
  return (present) => {
    for (;;) {
      n++
      let id
      const k = rnd()
      if (k < 0.3) id = `item-${n}`
      else if (k < 0.45) id = pick([`a\0${n}`, `${n}\0`, `\0${n}`, `\0\0${n}\0`, `x\0\x01${n}`, `x\x01${n}`])
      else if (k < 0.6) id = pick([`é${n}`, `日本${n}`, `${n}😀`, `ü\0${n}ß`])
      else if (k < 0.85 && pool.length) {
        // An extension or a prefix of an id made before (code points kept whole).
        const base = pick(pool)
        if (rnd() < 0.6) id = base + pick(['\0', 'a', '\0\0', '\x01', '\0\x01', 'é', '0'])
        else {
          const cps = Array.from(base)
          id = cps.slice(0, 1 + Math.floor(rnd() * cps.length)).join('')
        }
      } else id = pick(['a', 'b', '\0', '\0\0', 'é', 'a\0', 'a\x01', 'ab', `${n % 97}`])
      if (!id || Buffer.byteLength(id) > 64 || present(id)) continue
      if (pool.length < 500) pool.push(id)
      else pool[Math.floor(rnd() * pool.length)] = id
      return id
    }
  }
}

/**
 * Random operations on one index, each result compared with the model's; the structure checked
 * every `every` steps. Returns how many leaves were over LEAF at the checks (summed).
 */
async function randomRun(name, seed, { steps = 4000, gap = '', every = 250, grown = false } = {}) {
  const rnd = prng(seed)
  const ix = await index(name, gap)
  const model = new Model()
  const newId = idMaker(rnd)
  const present = (id) => model.ids.has(id)
  const TTL = 3_600_000
  // In the future: an append gives each leaf its entries' latest expiry as its TTL.
  let t = Date.now() + 86_400_000
  let lastX = t + TTL
  let over = 0, leaves = 0, appended = 0
  const pickNow = () => {
    if (model.count && rnd() < 0.7) return model.a[Math.floor(rnd() * model.count)].x + Math.floor(rnd() * 3) - 1
    return t + Math.floor(rnd() * TTL * 1.4) - TTL / 5
  }
  for (let step = 1; step <= steps; step++) {
    const k = rnd()
    const top = model.count ? model.a[model.count - 1].x : 0
    if (k < 0.03 && top < NEVER - 1_000_000) {
      // A staged batch moved in (tracker_common.lua, compact_staged): entries above every one,
      // in order, many with equal expiries.
      let x = Math.max(top, t + TTL) + 1 + Math.floor(rnd() * 3)
      const batch = []
      for (let i = 1 + Math.floor(rnd() * 300); i > 0; i--) {
        if (rnd() < 0.3) x += 1 + Math.floor(rnd() * 5)
        batch.push([x, newId((v) => present(v) || batch.some(([, b]) => b === v))])
      }
      batch.sort((p, q) => p[0] - q[0] || Buffer.compare(Buffer.from(p[1]), Buffer.from(q[1])))
      assert.equal(await ix.append(batch), 0)
      for (const [bx, id] of batch) model.add(bx, id)
      lastX = Math.max(lastX, x)
      appended += batch.length
    } else if (k < 0.55) {
      t += Math.floor(rnd() * 2000)
      let x
      const shape = rnd()
      if (shape < 0.2) x = lastX // equal expiries
      else if (shape < 0.35) x = t + Math.floor(rnd() * TTL * 1.5) - TTL / 2 // out of order
      else if (shape < 0.352 && step > steps / 2) x = NEVER // (late: appends need entries below)
      else if (shape < 0.39 && model.count) x = model.a[0].x - Math.floor(rnd() * 3) // at or below every bound
      else x = t + TTL
      if (x !== NEVER) lastX = Math.max(lastX, x)
      if (rnd() < 0.003) {
        // A batch completion: hundreds of ids with the same expiry, in one call.
        const batch = []
        for (let i = 200 + Math.floor(rnd() * 300); i > 0; i--) {
          const id = newId((v) => present(v) || batch.some(([, b]) => b === v))
          batch.push([x, id])
        }
        assert.equal(await ix.add(batch), 0)
        for (const [bx, id] of batch) model.add(bx, id)
      } else {
        const id = newId(present)
        assert.equal(await ix.add([[x, id]]), 0)
        model.add(x, id)
      }
    } else if (k < 0.65 && model.count) {
      const e = model.a[Math.floor(rnd() * model.count)]
      assert.equal(await ix.remove(e.x, e.id), 1, `remove ${JSON.stringify(e.id)}`)
      model.remove(e.x, e.id)
    } else if (k < 0.72) {
      // Absent: an id never added, or a present id with another expiry.
      let x = pickNow(), id = newId(present)
      if (model.count && rnd() < 0.5) {
        const e = model.a[Math.floor(rnd() * model.count)]
        id = e.id
        x = e.x + (rnd() < 0.5 ? 1 : -1)
      }
      assert.equal(await ix.remove(x, id), 0, `remove absent ${JSON.stringify(id)}`)
    } else if (k < 0.745) {
      // Purges mostly reach the oldest entries only, as the tracker's do (the index keeps growing).
      const now = model.count && rnd() < 0.95 ? model.a[Math.floor(rnd() ** 6 * model.count)].x : pickNow()
      const max = [1, 3, 20, 100, 300][Math.floor(rnd() ** 2 * 5)]
      assert.deepEqual(await ix.pop(now, max), model.pop(now, max), `pop(${now}, ${max}) at step ${step}`)
    } else if (k < 0.84) {
      const now = pickNow()
      assert.equal(await ix.expired(now), model.expired(now), `expired(${now}) at step ${step}`)
    } else if (k < 0.92) {
      const first = Math.floor(rnd() * (model.count + 20))
      const n = [0, 1, 7, 50, 250][Math.floor(rnd() * 5)]
      assert.deepEqual(await ix.range(first, n), model.range(first, n), `range(${first}, ${n}) of ${model.count} at step ${step}`)
    } else if (k < 0.96) {
      assert.equal(await ix.head(), model.count ? model.a[0].x : null, 'head')
      assert.equal(await ix.tail(), model.count ? model.a[model.count - 1].x : null, 'tail')
    } else {
      assert.equal(await ix.count(), model.count, 'count')
    }
    if (step % every === 0 || step === steps) {
      over += await check(ix, model, { grown })
      leaves = Math.max(leaves, await r.call('ZCARD', ix.keys[0]))
    }
  }
  // Pages through everything, and counts at the ends.
  for (let first = 0; first < model.count; first += 173) assert.deepEqual(await ix.range(first, 173), model.range(first, 173))
  assert.equal(await ix.expired(-1), 0)
  assert.equal(await ix.expired(NEVER), model.count)
  assert.equal(await ix.expired(NEVER * 100), model.count)
  // Drained: the index is empty, the tree holds no node, and it starts again.
  while (model.count) assert.deepEqual(await ix.pop(NEVER, 400), model.pop(NEVER, 400))
  assert.deepEqual([await ix.head(), await ix.tail(), await ix.count()], [null, null, 0])
  await check(ix, model)
  assert.equal(await ix.add([[t, 'again']]), 0)
  model.add(t, 'again')
  await check(ix, model)
  return { over, leaves, appended }
}

test('the library defines only `cidx_lib` and its cache, and reads no KEYS or ARGV', () => {
  const code = LIB.replace(/--.*$/gm, '')
  const top = [...code.matchAll(/^(?:local\s+(?:function\s+)?([\w,\s]+?)\s*(?:=|\(|$)|function\s+([\w.:]+))/gm)]
  assert.deepEqual(top.map((m) => m[1] || m[2]), ['cidx_made', 'cidx_lib'])
  // Inside the maker: the table itself, and functions of it only.
  for (const m of code.matchAll(/^  (?:local\s+(?:function\s+)?([\w,\s]+?)\s*(?:=|\(|$)|function\s+([\w.:]+))/gm)) {
    if (m[1]) assert.equal(m[1], 'cidx', `local ${m[1]} in the maker`)
    else assert.ok(m[2].startsWith('cidx.'), `function ${m[2]}`)
  }
  assert.ok(!/\b(KEYS|ARGV)\b/.test(code), 'no KEYS or ARGV')
  assert.ok(!/\.\.\s*(x|n|leaf|j|now|top)\b(?!\s*\()/.test(code), 'no number concatenated')
})

test('random adds, removes, purges, counts and pages match the model (default gap)', { skip }, async () => {
  let over = 0
  for (const seed of [1, 2, 3]) {
    const res = await randomRun(`def${seed}`, seed)
    over += res.over
    assert.ok(res.leaves > 10, `${res.leaves} leaves`)
    assert.ok(res.appended > 500, `${res.appended} entries appended`)
  }
  assert.equal(over, 0, 'no leaf went over LEAF')
})

test('leaf numbers above 2^31 (gap 2^40)', { skip }, async () => {
  await randomRun('big', 11, { gap: 2 ** 40, steps: 1500 })
  const ix = await index('big', 2 ** 40)
  const top = Number(await r.call('HGET', ix.keys[1], 'top'))
  assert.ok(top > 2 ** 31 && top % 2 ** 40 === 0, `top ${top}`)
})

test('a gap of 2 and of 1: splits run out of numbers, leaves grow past LEAF and stay exact', { skip }, async () => {
  const a = await randomRun('gap2', 21, { gap: 2, steps: 2000, every: 400, grown: true })
  const b = await randomRun('gap1', 22, { gap: 1, steps: 2000, every: 400, grown: true })
  assert.ok(a.over + b.over > 0, 'some leaf had no free number')
})

test('appends are 6 commands each, one HINCRBY, no HMGET but at a split; none goes over LEAF', { skip }, async () => {
  const ix = await index('append')
  const model = new Model()
  const base = 1_700_000_000_000
  await ix.add([[base, 'warm']])
  model.add(base, 'warm')
  await r.call('CONFIG', 'RESETSTAT')
  const N = 2000
  for (let i = 1; i <= N; i++) {
    const x = base + Math.floor(i / 3) // runs of equal expiries
    await ix.add([[x, `id-${i}`]], Date.now() + 3_600_000 + i)
    model.add(x, `id-${i}`)
  }
  const text = await r.call('INFO', 'commandstats')
  const n = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) n[m[1]] = Number(m[2])
  const splits = (await r.call('ZCARD', ix.keys[0])) - 1
  const inner = Object.entries(n).filter(([c]) => !c.startsWith('config') && c !== 'evalsha').reduce((s, [, v]) => s + v, 0)
  assert.ok(splits >= N / LEAF, `${splits} splits`)
  assert.equal(n.hincrby, N + splits, `one HINCRBY per append and per split (the old leaf's node): ${JSON.stringify(n)}`)
  assert.equal(n.hmget, splits, `one HMGET per split (the new leaf's node): ${JSON.stringify(n)}`)
  assert.ok(inner <= N * 6 + splits * 12, `${inner / N} commands per append: ${JSON.stringify(n)}`)
  assert.equal(await check(ix, model), 0)
})

test('a leaf with no free number grows; once one is free it splits a slice per add, into a number made before', { skip }, async () => {
  const ix = await index('stuck', 1)
  const model = new Model()
  const add = async (x, id) => { assert.equal(await ix.add([[x, id]]), 0); model.add(x, id) }
  // Leaves 1 and 2 (an append split), then 300 entries below leaf 2's bound: leaf 1 cannot split.
  for (let i = 0; i < LEAF + 1; i++) await add(1000 + i * 10, `a${i}`)
  const leaf2 = parseMember((await r.call('ZRANGE', ix.keys[0], 1, 1))[0])
  assert.equal(leaf2[2], 2)
  for (let i = 0; i < 300; i++) await add(1001 + (i % 40), `b${i}`)
  assert.ok(await check(ix, model) >= 1)
  assert.ok((await r.call('ZCARD', `${ix.keys[2]}1`)) > 300)
  // Leaf 2 emptied: leaf 1 is the last; its next add splits the top LEAF entries into number 2.
  for (const e of model.a.filter((e) => Model.cmp(e, { x: leaf2[0], buf: Buffer.from(leaf2[1]) }) >= 0)) {
    assert.equal(await ix.remove(e.x, e.id), 1)
    model.remove(e.x, e.id)
  }
  assert.equal(await r.call('ZCARD', ix.keys[0]), 1)
  const before = await r.call('ZCARD', `${ix.keys[2]}1`)
  await add(1002, 'c0')
  assert.equal(await r.call('ZCARD', `${ix.keys[2]}2`), LEAF)
  assert.equal(await r.call('ZCARD', `${ix.keys[2]}1`), before + 1 - LEAF)
  await check(ix, model)
  await add(1003, 'c1') // no number between 1 and 2 now
  await check(ix, model)
  for (let first = 0; first < model.count; first += 37) assert.deepEqual(await ix.range(first, 37), model.range(first, 37))
  for (const now of [999, 1000, 1005, 1040, 1500, 5000]) assert.equal(await ix.expired(now), model.expired(now))
})

test('a leaf made above a top that is not a multiple of the gap: nodes on top\'s update path are made', { skip }, async () => {
  // Leaves 1024 and 2048; 1024 splits into 1536; 2048 is emptied: 1536 is the last leaf, below
  // top. Its split makes 2560 (top, lowbit 512), whose split makes 3584: node 3072 then covers
  // leaf 2560 and must be made from top's prefix sums (no leaf is numbered 3072).
  const ix = await index('grow')
  const model = new Model()
  const add = async (x, id) => { assert.equal(await ix.add([[x, id]]), 0); model.add(x, id) }
  for (let i = 0; i <= LEAF; i++) await add(10_000 + i * 10, `a${i}`)
  for (let i = 0; i <= LEAF / 2; i++) await add(10_001 + i, `b${i}`)
  const numbers = async () => (await r.call('ZRANGE', ix.keys[0], 0, -1)).map((m) => parseMember(m)[2])
  assert.deepEqual(await numbers(), [1024, 1536, 2048])
  for (const e of model.a.filter((e) => e.x >= 10_000 + (LEAF / 2) * 10)) assert.equal(await ix.remove(e.x, e.id), 1), model.remove(e.x, e.id)
  assert.deepEqual(await numbers(), [1024, 1536])
  await check(ix, model)
  for (let i = 0; (await numbers()).length < 4; i++) await add(20_000 + i, `c${i}`)
  assert.deepEqual(await numbers(), [1024, 1536, 2560, 3584])
  assert.equal(Number(await r.call('HGET', ix.keys[1], 'top')), 3584)
  assert.ok(Number(await r.call('HGET', ix.keys[1], '3072')) > 0, 'node 3072 made')
  await check(ix, model)
  for (let i = 0; i < 300; i++) await add(30_000 + i, `d${i}`)
  await check(ix, model)
  for (let first = 0; first < model.count; first += 41) assert.deepEqual(await ix.range(first, 41), model.range(first, 41))
  for (const e of model.a.slice(0, model.count)) if (e.x % 3 === 0) assert.equal(await ix.remove(e.x, e.id), 1), model.remove(e.x, e.id)
  await check(ix, model)
})

test('a leaf whose key expired: counted until the purge drops it (reported), skipped by pages, reconciled by an add', { skip }, async () => {
  const ix = await index('gone')
  const model = new Model()
  const rnd = prng(7)
  const newId = idMaker(rnd)
  const base = 1_700_000_000_000
  const batch = []
  for (let i = 0; i < 1200; i++) {
    const x = base + i * 10 + (i % 7 === 0 ? 5 : 0)
    const id = newId((v) => model.ids.has(v))
    batch.push([x, id])
    model.add(x, id)
  }
  for (let i = 0; i < batch.length; i += 100) assert.equal(await ix.add(batch.slice(i, i + 100)), 0)
  await check(ix, model)
  const root = async () => (await r.call('ZRANGE', ix.keys[0], 0, -1)).map(parseMember)
  // The key of the 3rd leaf expires (DEL, as its TTL would).
  const gone = async (n) => {
    const entries = await r.call('ZRANGE', `${ix.keys[2]}${n}`, 0, -1)
    assert.ok(entries.length > 0)
    for (const id of entries) model.ids.get(id).gone = n
    await r.call('DEL', `${ix.keys[2]}${n}`)
    return entries.length
  }
  const third = (await root())[2][2]
  const c3 = await gone(third)
  const lastGone = model.a.filter((e) => e.gone !== undefined).at(-1)
  await check(ix, model, { allowGone: true })
  assert.equal(await ix.count(), 1200)
  for (const now of [lastGone.x, lastGone.x + 1, base + 5000, base + 11000, base - 1]) assert.equal(await ix.expired(now), model.expired(now), `expired(${now})`)
  for (const [first, n] of [[0, 1200], [100, 200], [model.a.findIndex((e) => e.gone !== undefined) + 3, 150], [150, 5], [300, 1000]]) {
    assert.deepEqual(await ix.range(first, n), model.range(first, n), `range(${first}, ${n})`)
  }
  assert.equal(await ix.remove(lastGone.x, lastGone.id), 0, 'an entry of the lost leaf is not found')
  assert.equal(await ix.head(), model.a[0].x)
  // Purges of 70 at most: the lost leaf counts toward max, its entries reported as dropped.
  const now = base + 6000
  let dropped = 0
  for (;;) {
    const [ids, d] = await ix.pop(now, 70)
    assert.deepEqual([ids, d], model.pop(now, 70))
    dropped += d
    if (ids.length === 0 && d === 0) break
  }
  assert.equal(dropped, c3)
  assert.equal(await ix.count(), model.count)
  await check(ix, model)

  // The last leaf's key expires: tail gives its bound; an add after it finds the key empty.
  const [lx, , last] = (await root()).at(-1)
  const cl = await gone(last)
  assert.equal(await ix.tail(), lx)
  assert.equal(await ix.count(), model.count)
  assert.equal(await ix.add([[base + 50000, 'late']]), cl)
  assert.equal(model.drop(last), cl)
  model.add(base + 50000, 'late')
  await check(ix, model)

  // The first leaf's key expires: head gives its bound; an add below every bound lowers it.
  const [fx, , firstLeaf] = (await root())[0]
  const cf = await gone(firstLeaf)
  assert.equal(await ix.head(), fx)
  assert.equal(await ix.add([[base - 100, 'early']]), cf)
  assert.equal(model.drop(firstLeaf), cf)
  model.add(base - 100, 'early')
  await check(ix, model)
  assert.deepEqual((await root())[0].slice(0, 2), [base - 100, 'early'])
  assert.equal(await ix.head(), base - 100)
  for (let first = 0; first < model.count; first += 97) assert.deepEqual(await ix.range(first, 97), model.range(first, 97))
})
