-- Item Tracker: claim many items of one group under one owner token, atomically, with a compact
-- reply. The same rules as a claim of tracker_apply.lua, the same records and indexes, with
-- variadic commands: per 500 ids one HMGET, one HSET and one ZADD.
-- KEYS: the group (see tracker_common.lua).
-- ARGV[1]: retention ms; ARGV[2]: timeline length; ARGV[3]: owner; ARGV[4]: lease ms;
-- ARGV[5]: '1' to re-claim completed items (or '0' when not), then the maxAttempts when there
-- is one, then ':' and the claims' note when there is one; ARGV[6]: the ids' hashes (id_hash.rs:
-- 4 bytes each, in order); ARGV[6+i]: id i (the caller passes each id once).
-- Reply: now, then the exceptions to "claimed by this call, attempt 1" (a new item, the usual
-- case), as triples: the id's position i, its outcome (c claimed, p in progress, d completed,
-- x dead) and its attempts after the call.
local retention, maxtl, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), owner_field(ARGV[3])
local lease_end = now + tonumber(ARGV[4])
local flags, note = claim_note(ARGV[5])
local reclaim = string.byte(flags, 1) == 49
local max_attempts = #flags > 1 and tonumber(string.sub(flags, 2)) or false
local expires = lease_end + retention
-- Numbers handed to redis.call as Lua numbers are formatted on every call: format them once.
local lease_end_s = string.format('%d', lease_end)
local n = #ARGV - 6
local hashes = ARGV[6]
local CHUNK = 500
read_meta(redis.call('HGET', KEYS[4], META))
purge(retention, math.max(100, 2 * n))

-- Every new item gets the same record: pack it once.
local fresh = {s = 'p', a = 1, o = owner, l = lease_end, c = now, u = now, d = 0, e = false, x = expires,
  m = max_attempts, nt = note, rs = false, n = 0, tl = ''}
remember(fresh, maxtl, now, 'p', 1)
fresh = pack_rec(fresh)

local ex = {}
local any = false
for c = 0, n - 1, CHUNK do
  local last = math.min(c + CHUNK, n)
  if last - c >= 64 then
    -- A field longer than any id (ids are at most 1024 bytes), written and removed at once: the
    -- records hash leaves listpack encoding (Redis keeps up to 512 small fields as one, where
    -- each lookup and insert walks the whole key, so a chunk's HMGET and HSET were quadratic
    -- until the group outgrew it). No-op on a group without records.
    local wide = string.rep('~', 1025)
    redis.call('HSET', KEYS[4], wide, '')
    redis.call('HDEL', KEYS[4], wide)
  end
  local raws = redis.call('HMGET', KEYS[4], unpack(ARGV, 7 + c, 6 + last))
  -- Those not in the records hash may be completed ones in a bucket (see compact).
  local inb = false
  if has_compact() then
    local _, b = compact(false)
    local miss, mh = {}, {}
    for j = 1, last - c do
      if not raws[j] then miss[#miss + 1] = j; mh[#mh + 1] = id_hash(hashes, c + j) end
    end
    if #miss > 0 then
      local ids = {}
      for q = 1, #miss do ids[q] = ARGV[6 + c + miss[q]] end
      local got = crec_lib().mget(b, ids, mh)
      inb = {}
      for q = 1, #miss do
        if got[q] then raws[miss[q]] = got[q]; inb[miss[q]] = mh[q] end
      end
    end
  end
  local hs, zs, moved = {}, {}, {}
  -- Completed records this chunk takes (they leave the compact index), and the buckets' ones.
  local was_done, out_b, out_bh = {}, {}, {}
  for j = 1, last - c do
    local i = c + j
    local id, raw = ARGV[6 + i], raws[j]
    local rec = false
    if raw then
      rec = unpack_rec(raw)
      if rec.x <= now then rec = false end
    end
    -- The claim rule: rules::tracker::claim (Rust), then rules::tracker::take.
    if rec and rec.s == 'p' and rec.l > now then
      ex[#ex + 1] = i; ex[#ex + 1] = 'p'; ex[#ex + 1] = rec.a
    elseif rec and rec.s == 'c' and not reclaim then
      ex[#ex + 1] = i; ex[#ex + 1] = 'd'; ex[#ex + 1] = rec.a
    elseif rec and rec.s == 'x' then
      ex[#ex + 1] = i; ex[#ex + 1] = 'x'; ex[#ex + 1] = rec.a
    else
      local js = fresh
      if rec then
        if rec.s == 'p' then remember(rec, maxtl, rec.l, 'a', rec.a) end
        rec.a = rec.a + 1
        remember(rec, maxtl, now, 'p', rec.a)
        rec.s = 'p'; rec.o = owner; rec.l = lease_end; rec.u = now; rec.d = 0; rec.x = expires
        rec.m = max_attempts
        -- The note is the claim's own, and a claim clears the result (rules::tracker::take).
        rec.nt, rec.rs = note, false
        js = pack_rec(rec)
        ex[#ex + 1] = i; ex[#ex + 1] = 'c'; ex[#ex + 1] = rec.a
      end
      hs[#hs + 1] = id; hs[#hs + 1] = js
      zs[#zs + 1] = lease_end_s; zs[#zs + 1] = id
      moved[#moved + 1] = id
      if raw and string.byte(raw, 1) == 99 then was_done[#was_done + 1] = id; was_done[#was_done + 1] = raw end
      if inb and inb[j] then out_b[#out_b + 1] = id; out_bh[#out_bh + 1] = inb[j] end
    end
  end
  if #moved > 0 then
    any = true
    redis.call('HSET', KEYS[4], unpack(hs))
    zs[#zs + 1] = 'inf'; zs[#zs + 1] = END
    redis.call('ZADD', KEYS[1], unpack(zs))
    bound(1, lease_end)
    -- Out of completed / failed (no-ops for new items; dead items are not claimed).
    redis.call('ZREM', KEYS[2], unpack(moved))
    redis.call('ZREM', KEYS[3], unpack(moved))
    for q = 1, #was_done, 2 do unindex_completed(was_done[q], was_done[q + 1]) end
    if #out_b > 0 then crec_lib().del_many(rst, out_b, out_bh) end
  end
end
compact_save()
if any then keep_alive(expires, true) end
save({}, any)
return {now, ex}
