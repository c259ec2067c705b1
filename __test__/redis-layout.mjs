// Where a tracker group's data lives on Redis (docs/redis-compact.md), for the tests that look at
// the keys themselves: records in the records hash `<head>:r` (every one but completed ones that
// fit a record bucket), completed records in buckets `<head>:c:b:<gen>:<n>`, completed ids in the
// compact index's leaves `<head>:c:l:<gen>:<n>` (root `<head>:c:r`, tree hash `<head>:c`).

/** 32-bit FNV-1a over the UTF-8 bytes of `id` (or a Buffer's bytes), as id_hash.rs and tracker_crec.lua compute it. */
export function idHash(id) {
  let h = 0x811c9dc5
  for (const b of Buffer.from(id)) h = Math.imul(h ^ b, 0x01000193) >>> 0
  return h
}

/** The group's bookkeeping: generation and the buckets' level and split pointer (0s: none). */
export async function bookkeeping(r, head) {
  const m = (await r.call('HGET', `${head}:r`, '')) || ''
  const [, , , gen = '0', k = '0', s = '0', n = '0'] = String(m).split(' ')
  return { gen: Number(gen), k: Number(k), s: Number(s), n: Number(n) }
}

/** The key of the bucket that holds (or would hold) `id`'s completed record; null without one. */
export async function bucketOf(r, head, id) {
  const { gen, k, s } = await bookkeeping(r, head)
  if (!gen) return null
  const h = idHash(id)
  let b = h % 2 ** k
  if (b < s) b = h % 2 ** (k + 1)
  return `${head}:c:b:${gen}:${b}`
}

/** The key that holds `id`'s record: the records hash, its bucket, or null (none). */
export async function recordKey(r, head, id) {
  if (await r.call('HEXISTS', `${head}:r`, id)) return `${head}:r`
  const bucket = await bucketOf(r, head, id)
  if (bucket && (await r.call('HEXISTS', bucket, id))) return bucket
  return null
}

/** Every key of the compact layout of the group (tree hash, root, leaves, buckets). */
export async function compactKeys(r, head) {
  // The head holds the tag's braces: escape them for MATCH.
  const glob = head.replace(/[*?[\]\\{}]/g, (c) => `\\${c}`)
  return (await r.scanAll(`${glob}:c*`)).sort()
}

/** How many records the group holds, wherever they are (the bookkeeping field not counted). */
export async function recordCount(r, head) {
  let n = (await r.call('HLEN', `${head}:r`)) - (await r.call('HEXISTS', `${head}:r`, ''))
  for (const k of await compactKeys(r, head)) if (k.includes(':c:b:')) n += await r.call('HLEN', k)
  return n
}

/** The ids of the compact completed index (every leaf), with the legacy index's below +inf. */
export async function completedIds(r, head) {
  const ids = (await r.call('ZRANGEBYSCORE', `${head}:s:completed`, '-inf', '(inf')) || []
  for (const k of await compactKeys(r, head)) if (k.includes(':c:l:')) ids.push(...(await r.call('ZRANGE', k, '0', '-1')))
  return ids.sort()
}
