-- Item Tracker: completed records in small hashes (docs/redis-compact.md, "Record buckets"),
-- prepended to the tracker scripts that need them. A bucket is a hash id -> packed record that
-- holds few entries, so Redis keeps it as a listpack (about 15 B per id and 44 B per 42-byte
-- record, against the 32-byte entries and separate allocations of a large hash's table). Buckets
-- are addressed by linear hashing on the id's 32-bit FNV-1a hash `h`: with level `k` and split
-- pointer `s`, the id is in bucket `h % 2^k`, or `h % 2^(k+1)` when that is below `s`; there are
-- `2^k + s` buckets. A write that brings the record count `n` above LOAD per bucket splits bucket
-- `s` into `s` and `s + 2^k` and advances `s` (at `2^k`: `k + 1`, `s = 0`): one split per write
-- at most, so every call does O(1) commands per id. Buckets are never merged.
-- Everything here is inside one table, `crec`, made by `crec_lib()` on first use (a script
-- makes every function it defines again on each call, and most calls use none of these), so
-- the scripts it is prepended to get two names more and nothing at load time runs a command. It
-- reads no KEYS or ARGV: the caller names the keys.
--   local crec = crec_lib()
--   local st = crec.open(bucket_prefix, is_dead, {k =, s =, n =})  -- reads nothing
--   ... crec.get / mget / set / del / del_many / sweep ...
--   if crec.save(st) then ... keep st.k, st.s, st.n ... end        -- writes nothing
-- The caller keeps the linear-hashing state `k`, `s` and `n` (the tracker: in its bookkeeping,
-- see META in tracker_common.lua) and hands it to open; save tells whether it changed. Bucket
-- `b` is the key `bucket_prefix .. b` (decimal). `is_dead(raw)` (optional) tells a record that
-- may be dropped (the tracker's: expired); splits and sweeps drop such records. `h` is always the id's hash as a number (crec.fnv1a: id_hash.rs computes it for
-- the caller), never computed here on the way of a call.
-- The caller keeps out of buckets what would make one a hashtable for good: a record or an id
-- over 64 bytes (hash-max-listpack-value); a bucket of such an id stays correct, only larger.
-- `n` counts what this code wrote and removed: a bucket that leaves by its TTL (every record in
-- it expired, the group idle) is not counted off, so `n` may run ahead of the buckets, which only
-- makes splits come early (buckets emptier), never a record lost.
-- Numbers become text only through string.format('%d', …) (concatenation would write '1e+14').
local crec_made = false
local function crec_lib()
  if crec_made then return crec_made end
  local crec = {}
  -- Records per bucket, on average, above which a write splits one. Buckets not yet split in a
  -- round hold about twice as many as the split ones, so up to about 2 * LOAD (96) before their
  -- turn: below Redis's default hash-max-listpack-entries (128), with room for chance but not for
  -- every chance (a group that stays near the end of a round while its records turn over long
  -- enough sees a bucket pass 128 now and then, which then stays a hashtable: more memory, same
  -- answers).
  -- 40, not 48: a simulation of a group near the end of a round whose records turn over (first in,
  -- first out, no further split) saw no bucket pass 128 at 40 (largest 123), and 1 in 1,925 to
  -- 3 in 16,000 at 48.
  local LOAD = 40
  local TWO32 = 4294967296

  -- FNV-1a, 32 bits, of the bytes of `s` (offset basis 2166136261, prime 16777619), as
  -- id_hash.rs (over UTF-8 bytes; npm `fnv1a` 1.x hashes UTF-16 units: the same only for ASCII).
  -- Lua numbers are doubles: the product is taken mod 2^32 as h * 403 + (h % 256) * 2^24
  -- (16777619 = 2^24 + 403; every term below 2^41 in size, so exact). bit.bxor returns a signed
  -- 32-bit value, congruent mod 2^32 to the unsigned one: Lua's % is floored (h % 256 is the low
  -- byte for a negative h too), so the final % 2^32 gives the unsigned product with no
  -- correction step.
  function crec.fnv1a(s)
    local h = 2166136261
    local bxor, byte = bit.bxor, string.byte
    for i = 1, #s do
      h = bxor(h, byte(s, i))
      h = (h * 403 + (h % 256) * 16777216) % TWO32
    end
    return h
  end

  -- The linear-hashing state, as the caller keeps it. `m` is 2^k; k0, s0, n0 what it was, so
  -- `save` tells whether it changed.
  function crec.open(bucket_prefix, is_dead, state)
    local k, s, n = state.k, state.s, state.n
    return {prefix = bucket_prefix, is_dead = is_dead or false, k = k, s = s, n = n, m = 2 ^ k, k0 = k, s0 = s, n0 = n}
  end

  -- Whether st.k, st.s or st.n changed since open (or the last save): the caller keeps them
  -- then. Called once, after the last crec call (again after more).
  function crec.save(st)
    local changed = st.k ~= st.k0 or st.s ~= st.s0 or st.n ~= st.n0
    st.k0, st.s0, st.n0 = st.k, st.s, st.n
    return changed
  end

  -- The bucket number of hash `h` (also crec.addr, for a caller that groups ids itself), and a
  -- bucket's key.
  local function addr(st, h)
    local b = h % st.m
    if b < st.s then b = h % (2 * st.m) end
    return b
  end
  local function key(st, b)
    return st.prefix .. string.format('%d', b)
  end
  crec.addr = addr

  -- Makes `bucket` live until at least `t` (ms since the epoch, in the future), never shorter: GT
  -- lengthens a TTL; it treats a key without one as living forever, so when it did nothing NX
  -- gives such a key `t` (and does nothing to a key whose TTL is at or past `t`). A bucket thus
  -- outlives every record written into it. `fresh`: the key is most likely new (a split's
  -- target), so NX first: one command instead of two.
  local function touch(bucket, t, fresh)
    local at = string.format('%d', t)
    local first, second = 'GT', 'NX'
    if fresh then first, second = 'NX', 'GT' end
    if redis.call('PEXPIREAT', bucket, at, first) == 0 then
      redis.call('PEXPIREAT', bucket, at, second)
    end
  end

  -- Positions of `ids` grouped by bucket: the bucket numbers in order of first appearance, and
  -- bucket -> list of positions.
  local function group(st, hs)
    local order, by = {}, {}
    for i = 1, #hs do
      local b = addr(st, hs[i])
      local at = by[b]
      if not at then at = {}; by[b] = at; order[#order + 1] = b end
      at[#at + 1] = i
    end
    return order, by
  end

  -- The record of `id`, or false.
  function crec.get(st, id, h)
    return redis.call('HGET', key(st, addr(st, h)), id)
  end

  -- The records of `ids` (hashes `hs`), in order, false for an absent one: one HMGET per bucket.
  function crec.mget(st, ids, hs)
    local out = {}
    local order, by = group(st, hs)
    for _, b in ipairs(order) do
      local at, names = by[b], {}
      for j = 1, #at do names[j] = ids[at[j]] end
      local got = redis.call('HMGET', key(st, b), unpack(names))
      for j = 1, #at do out[at[j]] = got[j] end
    end
    return out
  end

  -- Splits bucket `s`: its records whose `h % 2^(k+1)` is `s + 2^k` move there (one HSET), those
  -- `is_dead` tells are dropped (n counts them off), both leave bucket `s` with one HDEL. The
  -- target outlives what it receives: it gets the later of `t` and the source's expiry (which is
  -- past each moved record's). Then `s` advances. Reads one bucket of about 2 * LOAD records.
  local function split(st, t)
    local s, m = st.s, st.m
    local src = key(st, s)
    local all = redis.call('HGETALL', src)
    local is_dead = st.is_dead
    local move, out, dead = {}, {}, 0
    for i = 1, #all, 2 do
      local id, raw = all[i], all[i + 1]
      if is_dead and is_dead(raw) then
        out[#out + 1] = id; dead = dead + 1
      elseif crec.fnv1a(id) % (2 * m) == s + m then
        move[#move + 1] = id; move[#move + 1] = raw; out[#out + 1] = id
      end
    end
    if #move > 0 then
      local dst = key(st, s + m)
      redis.call('HSET', dst, unpack(move))
      local at = redis.call('PEXPIRETIME', src) -- -1 (none) or -2 (no key) fall to `t`
      if at < t then at = t end
      touch(dst, at, true)
    end
    if #out > 0 then redis.call('HDEL', src, unpack(out)) end
    st.n = st.n - dead
    s = s + 1
    if s == m then st.k = st.k + 1; st.m = 2 * m; s = 0 end
    st.s = s
  end

  -- Writes `raw` (at most 64 bytes, so the bucket stays a listpack) as the record of `id`; its
  -- bucket lives until at least `t`. Returns whether `id` was new, and whether this write split
  -- a bucket (only a new id may, and then one bucket at most).
  function crec.set(st, id, h, raw, t)
    local bucket = key(st, addr(st, h))
    local new = redis.call('HSET', bucket, id, raw) == 1
    touch(bucket, t, false)
    if not new then return false, false end
    st.n = st.n + 1
    if st.n > LOAD * (st.m + st.s) then
      split(st, t)
      return true, true
    end
    return true, false
  end

  -- Writes many records at once (`ids`, hashes `hs`, records `raws`, each to live until its `ts`):
  -- one HSET and one expiry per bucket (at the latest of its records'), then as many splits as
  -- the new records call for (one per LOAD of them, at most: bounded by the batch). Returns how
  -- many ids were new.
  function crec.set_many(st, ids, hs, raws, ts)
    local order, by = group(st, hs)
    local new = 0
    for _, b in ipairs(order) do
      local at, args, t = by[b], {}, 0
      for j = 1, #at do
        local i = at[j]
        args[2 * j - 1] = ids[i]
        args[2 * j] = raws[i]
        if ts[i] > t then t = ts[i] end
      end
      local bucket = key(st, b)
      new = new + redis.call('HSET', bucket, unpack(args))
      touch(bucket, t, false)
    end
    st.n = st.n + new
    local latest = 0
    for i = 1, #ts do if ts[i] > latest then latest = ts[i] end end
    local splits = math.ceil(new / LOAD) + 1
    while splits > 0 and st.n > LOAD * (st.m + st.s) do
      split(st, latest)
      splits = splits - 1
    end
    return new
  end

  -- Removes the record of `id`: 1 when there was one, else 0. A bucket emptied leaves (Redis
  -- drops an empty hash) and is made again, with a TTL, by the next write to it.
  function crec.del(st, id, h)
    local gone = redis.call('HDEL', key(st, addr(st, h)), id)
    st.n = st.n - gone
    return gone
  end

  -- Removes the records of `ids` (hashes `hs`): one HDEL per bucket. Returns how many there were.
  function crec.del_many(st, ids, hs)
    local order, by = group(st, hs)
    local gone = 0
    for _, b in ipairs(order) do
      local at, names = by[b], {}
      for j = 1, #at do names[j] = ids[at[j]] end
      gone = gone + redis.call('HDEL', key(st, b), unpack(names))
    end
    st.n = st.n - gone
    return gone
  end

  -- One bounded step of clean-up: drops the records of bucket `cursor` that `is_dead` (default:
  -- open's) tells (one HGETALL, one HDEL), for records nothing else removes (those whose bucket
  -- is not split soon). Returns the next cursor (0 after the last bucket, or when `cursor` is not
  -- a bucket) and how many records it dropped. Only deletes: no TTL to extend.
  function crec.sweep(st, cursor, is_dead)
    is_dead = is_dead or st.is_dead
    local count = st.m + st.s
    if cursor < 0 or cursor >= count then cursor = 0 end
    local nxt = cursor + 1
    if nxt >= count then nxt = 0 end
    if not is_dead then return nxt, 0 end
    local bucket = key(st, cursor)
    local all = redis.call('HGETALL', bucket)
    local out = {}
    for i = 2, #all, 2 do
      if is_dead(all[i]) then out[#out + 1] = all[i - 1] end
    end
    if #out > 0 then redis.call('HDEL', bucket, unpack(out)) end
    st.n = st.n - #out
    return nxt, #out
  end
  crec_made = crec
  return crec
end
