-- Item Tracker, shared by its scripts (prepended to each, after tracker_head.lua).
-- The group's bookkeeping, kept in the records hash under the field '' (no item id is empty), so
-- one HMGET reads it with a record and one HSET writes it with one: "<done> <lease> <deadline>",
-- where <done> is at most the lowest score of the completed and failed indexes (when the first of
-- them expires), <lease> at most the lowest score of the in-progress index (the first lease end),
-- and <deadline> when the group's keys expire (as `keep_alive` last set it; 0 unknown). Writers
-- lower the bounds when they index a record earlier and `purge` sets them from the indexes after
-- it ran; nothing else needs to, as a bound that is too low only makes a purge run early. With
-- them a call skips the purge scans when nothing can have expired, and `keep_alive` needs no
-- PTTL. `meta` is false when the field is absent (a group written before it was kept, or whose
-- bookkeeping was dropped): the next writer purges and sets it. Its three numbers are locals
-- (`meta_done`, `meta_lease`, `meta_deadline`), not a table: every call reads them, and what a
-- call allocates it also pays for in Lua's garbage collector.
-- Since the compact layout (docs/redis-compact.md) seven more numbers follow: "<gen> <bk> <bs>
-- <bn> <sc> <sl> <ct>", the generation of the group's compact keys (0: none yet), its record
-- buckets' linear hashing (level, split pointer, record count; see tracker_crec.lua), their sweep
-- (the next bucket, and how many are left to look at; see purge_slice), and the greatest expiry
-- in the compact index (0: none): a completion expiring after it is staged (see STAGE). They are a copy: the tree
-- hash (KEYS[6]) holds them too (`gen`, `k`, `s`, and `n` as of the last split), so the
-- bookkeeping stays something a call may drop; without the four (absent, or written by an
-- earlier version) `compact_known` is false and the first call that needs them reads KEYS[6].
local meta, meta_done, meta_lease, meta_deadline = false, 0, 0, 0
local meta_gen, meta_bk, meta_bs, meta_bn, compact_known = 0, 0, 0, 0, false
local meta_sc, meta_sl, meta_ct = 0, 0, 0
-- Whether the hash held the bookkeeping, and whether `meta` differs from what it holds.
local meta_found, meta_dirty = false, false
local function read_meta(raw)
  if not raw then return end
  meta_found = true
  local d, l, k, rest = string.match(raw, '^(%d+) (%d+) (%d+)(.*)$')
  if d then
    meta, meta_done, meta_lease, meta_deadline = true, tonumber(d), tonumber(l), tonumber(k)
    if rest ~= '' then
      local g, bk, bs, bn, sc, sl, ct = string.match(rest, '^ (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
      if g then
        meta_gen, meta_bk, meta_bs, meta_bn = tonumber(g), tonumber(bk), tonumber(bs), tonumber(bn)
        meta_sc, meta_sl, meta_ct = tonumber(sc), tonumber(sl), tonumber(ct)
        compact_known = true
      else
        meta = false
      end
    end
  end
end
-- Lowers the bound of index `k` to `score`.
local function bound(k, score)
  if not meta then return end
  if k == 1 then
    if score < meta_lease then meta_lease = score; meta_dirty = true end
  elseif score < meta_done then
    meta_done = score; meta_dirty = true
  end
end

-- The compact layout (docs/redis-compact.md): completed records of at most COMPACT bytes (and
-- ids as short) in record buckets (tracker_crec.lua), every completed id in the counted index
-- (tracker_cidx.lua); KEYS[6] is its tree hash, KEYS[7] its root; leaves and buckets are named
-- after the generation, so a group made again never reads an earlier one's keys.
-- `compact(make)`: the index's and the buckets' states, made on first use; false when the group
-- has no generation and `make` is false (with `make`, this call starts one).
local cst, rst = false, false
local wc = false -- this call made the index's root or tree hash (they need the group's expiry)
local function dead_record(raw)
  return (struct.unpack('<I6', raw, X_AT)) <= now
end
-- The compact index of the group's generation (meta_gen > 0).
local function cidx_open()
  return cidx_lib().open(KEYS[7], KEYS[6], KEYS[6] .. ':l:' .. string.format('%d', meta_gen) .. ':')
end
-- Whether the group has compact keys (reads the tree hash when the bookkeeping does not say).
local function has_compact()
  if not compact_known then
    local v = redis.call('HMGET', KEYS[6], 'gen', 'k', 's', 'n')
    meta_gen, meta_bk, meta_bs, meta_bn = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, tonumber(v[4]) or 0
    -- The index's greatest entry (see STAGE): its last leaf's last one; when that leaf's key
    -- went (all it held expired), now and an id after every id (ids are UTF-8: no byte 255).
    meta_ct = 0
    if meta_gen > 0 then
      local x, id = cidx_lib().tail(cidx_open())
      if id then
        meta_ct = x
        redis.call('HSET', KEYS[6], 'ctid', id)
      elseif x then
        meta_ct = now
        redis.call('HSET', KEYS[6], 'ctid', '\255')
      end
    end
    compact_known, meta_dirty = true, true
  end
  return meta_gen > 0
end
local function compact(make)
  if cst then return cst, rst end
  if not has_compact() then
    if not make then return false, false end
    meta_gen = tonumber(t[1]) * 1000000 + tonumber(t[2])
    meta_bk, meta_bs, meta_bn = 0, 0, 0
    meta_dirty = true
    redis.call('HSET', KEYS[6], 'gen', string.format('%d', meta_gen), 'k', 0, 's', 0, 'n', 0)
    wc = true
  end
  cst = cidx_open()
  rst = crec_lib().open(KEYS[6] .. ':b:' .. string.format('%d', meta_gen) .. ':', dead_record,
    {k = meta_bk, s = meta_bs, n = meta_bn})
  return cst, rst
end
-- Keeps the buckets' state in the bookkeeping when it changed.
local function compact_save()
  if rst and crec_lib().save(rst) then
    -- A split is kept in the tree hash too (see META); the count alone only here.
    if rst.k ~= meta_bk or rst.s ~= meta_bs then
      redis.call('HSET', KEYS[6], 'k', string.format('%d', rst.k), 's', string.format('%d', rst.s), 'n',
        string.format('%d', rst.n))
    end
    meta_bk, meta_bs, meta_bn = rst.k, rst.s, rst.n
    meta_dirty = true
  end
end
-- Whether a record goes to a bucket: completed, and it and its id fit a listpack value.
local function fits(id, rec, packed)
  return rec.s == 'c' and #id <= COMPACT and #packed <= COMPACT
end
-- How long a bucket or leaf holding a record that expires at `x` lives at least: until then,
-- exactly, so a group nobody calls leaves with its last record (README: forgotten at keepMs). A
-- leaf that goes so before a purge reached its ids leaves their records behind in their buckets
-- (expired, so read as absent): the purge then sweeps every bucket, one per call (purge_slice).
local function outlive(x)
  return math.max(math.min(x, NEVER), now + 1)
end
-- An id's hash as the buckets address it: from the caller's packed hashes (id_hash.rs) when
-- it gave them (`hashes`, the i-th 4 bytes), else computed.
local function id_hash(hashes, i, id)
  if hashes then return (struct.unpack('<I4', hashes, 4 * i - 3)) end
  return crec_lib().fnv1a(id)
end
-- Completions are staged: a completion expiring after every entry of the compact index (the
-- usual one) is written as before the compact layout, its record in the records hash and its
-- id in KEYS[2]; once KEYS[2] holds more than STAGE ids, a general call moves its lowest live ones
-- into the compact index in one append and their records into their buckets (`compact_staged`):
-- a few commands per record, where a completion written straight into the compact layout costs
-- about ten. A call of `n` operations runs up to 1 + floor(n / STAGE_MAX) steps of up to
-- STAGE_MAX each (Lua's unpack takes at most 8,000 values): work in proportion to the call, and
-- a batch of completions moves at least as many as it staged, so KEYS[2] stays small. Every
-- compact entry sorts below every staged one, and the completed ids in order are the compact
-- index's, then KEYS[2]'s.
local STAGE, STAGE_MAX = 128, 1024
local function compact_step(max)
  local got = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%d', now), BELOW_END, 'WITHSCORES', 'LIMIT', 0, max)
  if #got == 0 then return 0 end
  local ids = {}
  for q = 1, #got, 2 do ids[#ids + 1] = got[q] end
  local raws = redis.call('HMGET', KEYS[4], unpack(ids))
  local flat, fid, fh, fraw, fx = {}, {}, {}, {}, {}
  local R = crec_lib()
  for q = 1, #ids do
    local id, raw, x = ids[q], raws[q], tonumber(got[2 * q])
    -- Only a live completed record of that expiry is moved (an id whose record changed since
    -- leaves KEYS[2] alone: its record is indexed where it is now).
    if raw and string.byte(raw, 1) == 99 and struct.unpack('<I6', raw, X_AT) == x then
      flat[#flat + 1] = id; flat[#flat + 1] = x
      if #id <= COMPACT and #raw <= COMPACT then
        fid[#fid + 1] = id; fh[#fh + 1] = R.fnv1a(id); fraw[#fraw + 1] = raw; fx[#fx + 1] = x
      end
    end
  end
  redis.call('ZREM', KEYS[2], unpack(ids))
  if #flat == 0 then return #ids end
  local c, b = compact(true)
  if not wc and redis.call('EXISTS', KEYS[7]) == 0 then wc = true end
  cidx_lib().append(c, flat)
  if #fid > 0 then
    R.set_many(b, fid, fh, fraw, fx)
    redis.call('HDEL', KEYS[4], unpack(fid))
  end
  -- The compact index's greatest entry now: the last one moved (KEYS[2] was read in order).
  meta_ct = flat[#flat]
  redis.call('HSET', KEYS[6], 'ctid', flat[#flat - 1])
  meta_dirty = true
  return #ids
end
local function compact_staged(n)
  for _ = 0, math.floor(n / STAGE_MAX) do
    if redis.call('ZCARD', KEYS[2]) <= STAGE or compact_step(STAGE_MAX) == 0 then return end
  end
end
-- Whether bytes `a` sort after bytes `b` (Lua's < follows the server's locale).
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
-- Whether a completion of `id` expiring at `x` is staged (see STAGE): it sorts after the compact
-- index's greatest entry (`ct`, and its id in the tree hash: read only on a tie).
local function staged_at(id, x)
  if x > meta_ct then return true end
  if x < meta_ct then return false end
  return after(id, redis.call('HGET', KEYS[6], 'ctid') or '')
end

-- The completed index's entry of a record as read (`raw`, expired or not) leaves it: the record
-- was completed. The legacy index (KEYS[2], groups written before the compact layout) is the
-- caller's.
local function unindex_completed(id, raw)
  if not raw or string.byte(raw, 1) ~= 99 then return end
  local c = compact(false)
  if c then cidx_lib().remove(c, (struct.unpack('<I6', raw, X_AT)), id) end
end

local function entry(at, code, attempt, err)
  if err then return struct.pack(ENTRY, at, code, attempt, 'e', #err, err) end
  return struct.pack(ENTRY, at, code, attempt, '-', 0, '')
end
-- The timeline a record's own fields imply (see tracker_head.lua), packed, or false.
local function implied(r)
  local s = r.s
  if s == 'x' then return false end
  local err = s == 'f' and r.e
  if r.a == 1 then
    local first = entry(r.c, 'p', 1)
    if s == 'p' then return first end
    return first .. entry(r.u, s, 1, err)
  elseif r.a == 0 and s ~= 'p' then
    return entry(r.u, s, 0, err)
  end
  return false
end
-- A record as a table: s (status code), a, o (owner, packed: '-' none), l, c, u, d, e (false:
-- none), x, m (maxAttempts, false: none), nt (the claim's note, false: none), rs (the
-- completion's result as JSON text, false: none), and its timeline packed: n entries in tl.
local function unpack_rec(raw)
  local s, a, c, u, x, pos = struct.unpack(HEAD, raw)
  local l, d, m = 0, u, false
  if s == 'p' then l, pos = struct.unpack('<I6', raw, pos); d = 0 end
  if string.byte(raw, pos) == 109 then m, pos = struct.unpack('<I4', raw, pos + 1) end
  local kind, o = string.byte(raw, pos), '-'
  if kind == 104 then
    o = string.sub(raw, pos, pos + 16); pos = pos + 17
  elseif kind == 116 then
    o = string.sub(raw, pos, pos + 2 + struct.unpack('<I2', raw, pos + 1)); pos = pos + #o
  else
    pos = pos + 1
  end
  local e = false
  if string.byte(raw, pos) == 101 then e, pos = struct.unpack('<I4c0', raw, pos + 1) else pos = pos + 1 end
  local nt, rs = false, false
  if string.byte(raw, pos) == 110 then nt, pos = struct.unpack('<I2c0', raw, pos + 1) end
  if string.byte(raw, pos) == 114 then rs, pos = struct.unpack('<I4c0', raw, pos + 1) end
  local r = {s = s, a = a, o = o, l = l, c = c, u = u, d = d, e = e, x = x, m = m, nt = nt, rs = rs,
    n = string.byte(raw, pos), tl = string.sub(raw, pos + 1)}
  if r.n == 0 then
    r.tl = implied(r)
    if s ~= 'p' and r.a == 1 then r.n = 2 else r.n = 1 end
  end
  return r
end
local function pack_rec(r)
  local n, tl = r.n, r.tl
  if implied(r) == tl then n, tl = 0, '' end
  local head
  if r.s == 'p' then head = struct.pack(HEAD .. 'I6', r.s, r.a, r.c, r.u, r.x, r.l)
  else head = struct.pack(HEAD, r.s, r.a, r.c, r.u, r.x) end
  if r.m then head = head .. struct.pack('<c1I4', 'm', r.m) end
  local err = '-'
  if r.e then err = struct.pack('<c1I4', 'e', #r.e) .. r.e end
  if r.nt then err = err .. struct.pack('<c1I2', 'n', #r.nt) .. r.nt end
  if r.rs then err = err .. struct.pack('<c1I4', 'r', #r.rs) .. r.rs end
  return head .. r.o .. err .. string.char(n) .. tl
end
-- Appends a transition to a record's timeline, dropping the oldest beyond `maxtl`.
local function remember(r, maxtl, at, code, attempt, err)
  local tl, n = r.tl .. entry(at, code, attempt, err), r.n + 1
  while n > maxtl do
    tl = string.sub(tl, 19 + struct.unpack('<I4', tl, 15))
    n = n - 1
  end
  r.tl, r.n = tl, n
end

-- A claim's text argument (see tracker_apply.lua): its flags and maxAttempts, and its note
-- after the first ':' (false: none).
local function claim_note(text)
  local colon = string.find(text, ':', 1, true)
  if not colon then return text, false end
  return string.sub(text, 1, colon - 1), string.sub(text, colon + 1)
end

-- A record read as `raw`, or false when there is none or it expired; `raw` itself (false with
-- no record); and the index it may be in: 1..3 or 5 (dead) for a live record's status, 0 for
-- none (no record), -1 for any (an expired record not purged yet).
local function decode(raw)
  if not raw then return false, false, 0 end
  local rec = unpack_rec(raw)
  if rec.x <= now then return false, false, -1 end
  local s = rec.s
  if s == 'p' then return rec, raw, 1 elseif s == 'c' then return rec, raw, 2 elseif s == 'f' then return rec, raw, 3
  elseif s == 'x' then return rec, raw, 5 end
  return rec, raw, -1
end

-- Forgets records whose time has passed, up to `max` ids looked at per index and call, in chunks
-- of at most 1000 ids: clean-up is done in bounded slices, so no call stalls Redis when many
-- records expire at once (the rest goes in later calls, and a group nobody calls again leaves
-- with its keys' TTL). Completed and failed: their index score is their expiry. In progress:
-- the score is the lease end and the record lives `retention` after it (the retention of the
-- client that claimed it, so the record itself decides). Writers pass at least twice the number
-- of items they write, so expired records cannot pile up in a group that is in use.
-- `listing` (listItems): look at every lease that ended, not only those that ended this
-- client's retention ago (a record claimed by a client with a shorter retention is gone before
-- that), stepping over records kept longer. Returns whether the in-progress index holds no
-- expired record after the call (then its abandoned count is exact).
local SLICE = 1000
-- `upkeep()` makes `purge_slice` (above) and `head` (the lowest score of an index) on first
-- use: most writes skip the clean-up (see META), and every function a script defines is made
-- again on each call.
local upkeep_fns = false
local function upkeep()
  if upkeep_fns then return upkeep_fns end
  local u = {}
  -- A record's expiry, without unpacking the rest.
  local function expiry_of(raw)
    return (struct.unpack('<I6', raw, X_AT))
  end
  function u.purge_slice(retention, max, listing)
    local function chunk(done) return math.min(1000, max - done) end
    for _, k in ipairs({2, 3, 5}) do -- completed, failed, dead: scored by expiry
      local done = 0
      while chunk(done) > 0 do
        local want = chunk(done)
        local ids = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'LIMIT', 0, want)
        if #ids == 0 then break end
        redis.call('HDEL', KEYS[4], unpack(ids))
        redis.call('ZREM', KEYS[k], unpack(ids))
        done = done + #ids
        if #ids < want then break end
      end
    end
    -- The compact index (completed): its expired ids, and their records wherever they are.
    local c, b = compact(false)
    if c then
      local C, R = cidx_lib(), crec_lib()
      local done = 0
      while chunk(done) > 0 do
        local want = chunk(done)
        local ids, unseen = C.pop_expired(c, now, want)
        if #ids > 0 then
          redis.call('HDEL', KEYS[4], unpack(ids))
          local hs = {}
          for i = 1, #ids do hs[i] = R.fnv1a(ids[i]) end
          R.del_many(b, ids, hs)
        end
        -- A leaf that left by its TTL: its records may be in any bucket (see outlive).
        if unseen > 0 then meta_sl = b.m + b.s; meta_dirty = true end
        done = done + #ids + unseen
        if #ids + unseen < want then break end
      end
      if meta_sl > 0 then
        meta_sc = R.sweep(b, meta_sc)
        meta_sl = meta_sl - 1
        meta_dirty = true
      end
    end
    local cutoff = now - retention
    if listing then cutoff = now end
    local done, kept = 0, 0
    while true do
      local want = chunk(done)
      if want <= 0 then return false end
      local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'LIMIT', kept, want)
      if #ids == 0 then return true end
      local raws = redis.call('HMGET', KEYS[4], unpack(ids))
      local gone = {}
      for j = 1, #ids do
        if not raws[j] or expiry_of(raws[j]) <= now then gone[#gone + 1] = ids[j] end
      end
      if #gone > 0 then
        redis.call('HDEL', KEYS[4], unpack(gone))
        redis.call('ZREM', KEYS[1], unpack(gone))
      end
      done = done + #ids
      kept = kept + #ids - #gone
      -- Records kept longer (claimed by a client with a longer retention) stay in front: a
      -- writer's purge stops there, a listing one steps over them.
      if #ids < want then return true end
      if not listing and #gone < #ids then return false end
    end
  end

  function u.head(k)
    local top = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
    if top[2] then return math.min(tonumber(top[2]), NEVER) end
    return NEVER
  end
  upkeep_fns = u
  return u
end

-- A writer's purge: skipped when the bookkeeping shows nothing expired (see META), else run and
-- the bounds set from what the indexes hold after it.
local function purge(retention, max)
  if meta and meta_done > now and meta_lease > now - retention then return end
  local u = upkeep()
  u.purge_slice(retention, max, false)
  if not meta then meta_deadline = 0 end
  meta, meta_done, meta_lease = true, math.min(u.head(2), u.head(3), u.head(5)), u.head(1)
  local c = compact(false)
  if c then meta_done = math.min(meta_done, cidx_lib().head(c) or NEVER) end
  meta_dirty = true
end

-- Sets how long the group's keys live: until its latest record expires. While items are in
-- progress, only ever later (`expires`: the latest expiry this call wrote; a record in progress
-- may have been claimed with a longer retention than this client's). Once none is, until the
-- latest completed or failed record expires, earlier too: a claim (lease + retention) followed
-- by a completion with a shorter keepMs must not leave the records behind their index. Every key
-- of the group gets the same expiry. It is made later by a slack (an eighth of the time left,
-- at least a second) more than needed, and earlier only when that gains more than twice the
-- slack: keys may outlive their last record by a quarter of its time left (at least 2 s), never
-- the other way round, and a stream of claims and completions mostly finds nothing to change
-- (the keys' expiry is read from the bookkeeping, see META; PTTL only without it). `w1`..`w3`:
-- this call's ZADD created that index (see END), which has no TTL yet.
local function slack(target)
  return math.max(1000, math.floor((target - now) / 8))
end
local function keep_alive(expires, w1, w2, w3, w5)
  local pttl
  if meta and meta_deadline > now then pttl = meta_deadline - now else pttl = redis.call('PTTL', KEYS[4]) end
  local current = now + pttl
  if pttl < 0 or current < expires or current > expires + 2 * slack(expires) then
    local in_progress = redis.call('ZCOUNT', KEYS[1], '-inf', BELOW_END) > 0
    local target = expires
    if not in_progress then
      target = 0
      for _, k in ipairs({2, 3, 5}) do -- completed, failed, dead: scored by expiry
        local top = redis.call('ZREVRANGEBYSCORE', KEYS[k], BELOW_END, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
        if top[2] and tonumber(top[2]) > target then target = tonumber(top[2]) end
      end
      local c = compact(false)
      if c then
        local top = cidx_lib().tail(c)
        if top and top > target then target = top end
      end
      if target <= now then
        -- No index holds a live record. UNLINK: a large hash is freed off Redis's main thread.
        if target > 0 then
          -- The compact index's leaves and the buckets stay: a later generation never reads
          -- them, and each leaves by its own TTL (all they hold has expired).
          redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
          meta = false
        end
        return
      end
    end
    local set = false
    if pttl < 0 or current < target then
      set = target + slack(target)
    elseif not in_progress and current > target + 2 * slack(target) then
      set = target
    end
    if set and set > now then
      local ms = string.format('%d', set - now)
      for k = 1, 5 do redis.call('PEXPIRE', KEYS[k], ms) end
      if meta_gen > 0 or wc then
        redis.call('PEXPIRE', KEYS[6], ms)
        redis.call('PEXPIRE', KEYS[7], ms)
      end
      if meta then meta_deadline = set; meta_dirty = true end
      return
    end
  end
  if pttl < 0 then return end
  if meta and meta_deadline ~= current then meta_deadline = current; meta_dirty = true end
  -- An index this call created has no TTL yet: it gets the group's.
  if w1 or w2 or w3 or w5 or wc then
    local at = string.format('%d', current)
    if wc then
      redis.call('PEXPIREAT', KEYS[6], at)
      redis.call('PEXPIREAT', KEYS[7], at)
    end
    if w1 then redis.call('PEXPIREAT', KEYS[1], at) end
    if w2 then redis.call('PEXPIREAT', KEYS[2], at) end
    if w3 then redis.call('PEXPIREAT', KEYS[3], at) end
    if w5 then redis.call('PEXPIREAT', KEYS[5], at) end
  end
end

-- Writes the bookkeeping when it changed, in one HSET with `fields` (field, value, …; nil for
-- none), the records this call writes. Only into a hash that holds records (was there before, or
-- `wrote`: this call wrote records): the bookkeeping alone never makes a key (it would have no TTL).
local function save(fields, wrote)
  if meta and meta_dirty and (meta_found or wrote or (fields and #fields > 0)) then
    fields = fields or {}
    fields[#fields + 1] = META
    if compact_known then
      fields[#fields + 1] = string.format('%d %d %d %d %d %d %d %d %d %d', meta_done, meta_lease, meta_deadline,
        meta_gen, meta_bk, meta_bs, meta_bn, meta_sc, meta_sl, meta_ct)
    else
      fields[#fields + 1] = string.format('%d %d %d', meta_done, meta_lease, meta_deadline)
    end
    meta_found, meta_dirty = true, false
  end
  if not fields then return end
  -- In chunks of 500 fields: unpack has a limit on how many values it returns.
  for c = 1, #fields, 1000 do
    redis.call('HSET', KEYS[4], unpack(fields, c, math.min(c + 999, #fields)))
  end
end
