-- Item Tracker: apply a batch of operations to items of one group, atomically.
-- KEYS: the group (see tracker_common.lua).
-- ARGV[1]: retention ms; ARGV[2]: timeline length; then 5 per operation, then the operations'
-- ids' hashes (id_hash.rs: 4 bytes each, in order); per operation:
--   action (c = claim, d = completed, f = failed, u = unset, r = revive), id, owner ('' = none),
--   number (claim: lease ms; completed/failed: how long to keep the record; revive: '1' to revive
--   failed items too), text (claim: '1' to re-claim a completed item, then the maxAttempts when
--   there is one, after a '0' when not re-claiming, then ':' and the note when there is one;
--   completed: the result's JSON text, '' none; failed: the reason; revive: '1' to reset the
--   attempts).
-- Reply: now, then per operation: 1 done | 0 busy | -1 refused, a word (busy: in_progress,
-- completed or dead; refused: not_owner), the record after the operation (before it for unset,
-- busy and refused) or false.
-- Most calls carry one operation (an item claimed, then completed): the loop allocates nothing
-- per operation beyond the record it rewrites.
local retention = tonumber(ARGV[1])
local maxtl = tonumber(ARGV[2])
local out = {now}
local latest = 0
local n = (#ARGV - 3) / 5
local hashes = ARGV[#ARGV]
-- The bookkeeping and the first operation's record in one read.
local first, first_where = false, false
if n > 0 then
  -- The fast path (tracker_apply_fast.lua) may have read them already.
  local r = pre_read or redis.call('HMGET', KEYS[4], META, ARGV[4])
  read_meta(r[1])
  first = r[2]
  -- Not in the records hash: in a bucket, when the group has any (see compact).
  if not first and has_compact() then
    local _, b = compact(false)
    first = crec_lib().get(b, ARGV[4], id_hash(hashes, 1))
    if first then first_where = 'b' end
  elseif first then
    first_where = 'r'
  end
else
  read_meta(redis.call('HGET', KEYS[4], META))
end
purge(retention, math.max(100, 2 * n))

-- Moves `id` to index `which` (0: none) from `was` (see decode: 0 none, -1 any); `old` is the
-- record as it was read (expired or not): a completed one leaves the compact index by its
-- expiry (and the legacy index, KEYS[2], of a group written before it). Completed ids go to the
-- compact index.
local w1, w2, w3, w5 = false, false, false, false
local function index(which, was, id, score, old, direct)
  if was ~= 0 then
    local staged = 0
    for k = 1, 5 do
      if k ~= 4 and (k ~= which or k == 2) and (was == k or was < 0) then
        local z = redis.call('ZREM', KEYS[k], id)
        if k == 2 then staged = z end
      end
    end
    -- A staged id (see STAGE) is in no other completed index.
    if (was == 2 or was < 0) and staged == 0 then unindex_completed(id, old) end
  end
  if which == 2 and direct then
    local c = compact(true)
    local _, made = cidx_lib().add(c, score, id, outlive(score))
    if made then wc = true end
    bound(2, score)
  elseif which > 0 then
    -- The end mark was added too (see END): a new index, or one whose ids we cannot know (an
    -- expired record may have left its id in it) gets the group's expiry.
    local added = redis.call('ZADD', KEYS[which], score, id, 'inf', END)
    if was < 0 or added > (was == which and 0 or 1) then
      if which == 1 then w1 = true elseif which == 2 then w2 = true elseif which == 3 then w3 = true
      else w5 = true end
    end
    bound(which, score)
  end
end

-- Records written by this call: `fields` (id, packed, …) for the one HSET at the end; `staged`
-- (id -> position of its value in `fields`, only with more than one operation) lets a later
-- operation on the same id read what an earlier one wrote, and the id is stored once. A record
-- written to a bucket is written at once: `staged` holds 'b' for it; false: unset.
local fields, staged = {}, false
if n > 1 then staged = {} end
-- Takes `id`'s record out of this call's HSET.
local function unstage(id)
  local at = staged and staged[id]
  if at and at ~= 'b' then
    -- Its id and value leave `fields` as a pair.
    table.remove(fields, at)
    table.remove(fields, at - 1)
    for other, pos in pairs(staged) do
      if pos and pos ~= 'b' and pos > at then staged[other] = pos - 2 end
    end
  end
end
-- Writes `rec` as `id`'s record (hash `h`), which is now `where` ('r' the records hash or this
-- call's HSET, 'b' a bucket, false none): a completed record that fits goes to a bucket, every
-- other to the records hash; it leaves the other place.
local function store(id, h, rec, where, direct)
  local packed = pack_rec(rec)
  if rec.x > latest then latest = rec.x end
  if direct and fits(id, rec, packed) then
    local _, b = compact(true)
    crec_lib().set(b, id, h, packed, outlive(rec.x))
    if where == 'r' then
      unstage(id)
      redis.call('HDEL', KEYS[4], id)
    end
    if staged then staged[id] = 'b' end
    return packed
  end
  if where == 'b' then crec_lib().del(rst, id, h) end
  local at = staged and staged[id]
  if at and at ~= 'b' then
    fields[at] = packed
  else
    fields[#fields + 1] = id
    fields[#fields + 1] = packed
    if staged then staged[id] = #fields end
  end
  return packed
end

for i = 0, n - 1 do
  local b = 3 + i * 5
  local action, id, owner = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local h = id_hash(hashes, i + 1)
  local raw, where = first, first_where
  if i > 0 then
    local at = staged[id]
    if at == nil then
      raw, where = redis.call('HGET', KEYS[4], id), 'r'
      if not raw then
        where = false
        if has_compact() then
          local _, bk = compact(false)
          raw = crec_lib().get(bk, id, h)
          if raw then where = 'b' end
        end
      end
    elseif at == 'b' then
      raw, where = crec_lib().get(rst, id, h), 'b'
    elseif at then
      raw, where = fields[at], 'r'
    else
      raw, where = false, false
    end
  end
  local old = raw
  local rec, raw, was = decode(raw)
  local k = #out
  if action == 'c' then
    -- The claim rule: rules::tracker::claim (Rust), then rules::tracker::take.
    local text, note = claim_note(ARGV[b + 4])
    if rec and rec.s == 'p' and rec.l > now then
      out[k + 1] = 0; out[k + 2] = 'in_progress'; out[k + 3] = raw
    elseif rec and rec.s == 'c' and string.byte(text, 1) ~= 49 then
      out[k + 1] = 0; out[k + 2] = 'completed'; out[k + 3] = raw
    elseif rec and rec.s == 'x' then
      out[k + 1] = 0; out[k + 2] = 'dead'; out[k + 3] = raw
    else
      local lease_end = now + tonumber(ARGV[b + 3])
      local m = #text > 1 and tonumber(string.sub(text, 2)) or false
      if rec then
        if rec.s == 'p' then remember(rec, maxtl, rec.l, 'a', rec.a) end
        rec.a = rec.a + 1
        rec.s, rec.o, rec.l, rec.u, rec.d, rec.x = 'p', owner_field(owner), lease_end, now, 0, lease_end + retention
        rec.m = m
        -- The note is the claim's own, and a claim clears the result (rules::tracker::take).
        rec.nt, rec.rs = note, false
      else
        rec = {s = 'p', a = 1, o = owner_field(owner), l = lease_end, c = now, u = now, d = 0, e = false,
          x = lease_end + retention, m = m, nt = note, rs = false, n = 0, tl = ''}
      end
      remember(rec, maxtl, now, 'p', rec.a)
      local packed = store(id, h, rec, where)
      index(1, was, id, lease_end, old)
      out[k + 1] = 1; out[k + 2] = ''; out[k + 3] = packed
    end
  elseif action == 'd' or action == 'f' then
    -- The owner check: rules::tracker::owns (Rust), then rules::tracker::finish.
    if owner ~= '' and (not rec or rec.o ~= owner_field(owner)) then
      out[k + 1] = -1; out[k + 2] = 'not_owner'; out[k + 3] = raw
    else
      if not rec then
        rec = {s = '', a = 0, o = '-', l = 0, c = now, u = now, d = 0, e = false, x = 0, m = false, nt = false,
          rs = false, n = 0, tl = ''}
      end
      -- A completion stores the result it gives, a failure none (rules::tracker::write).
      local status, which, err = 'c', 2, nil
      rec.rs = false
      if action == 'd' and ARGV[b + 4] ~= '' then rec.rs = ARGV[b + 4] end
      if action == 'f' then
        -- rules::tracker::failure: dead at the latest claim's maxAttempts.
        status, which, err = 'f', 3, ARGV[b + 4]; rec.e = err
        if rec.m and rec.a >= rec.m then status, which = 'x', 5 end
      end
      rec.s, rec.l, rec.u, rec.d = status, 0, now, now
      rec.x = math.min(now + tonumber(ARGV[b + 3]), NEVER)
      remember(rec, maxtl, now, status, rec.a, err)
      -- A completion goes straight into the compact layout only when it sorts below its
      -- greatest entry; else it is staged (see STAGE).
      local direct = which == 2 and not staged_at(id, rec.x)
      local packed = store(id, h, rec, where, direct)
      index(which, was, id, rec.x, old, direct)
      out[k + 1] = 1; out[k + 2] = ''; out[k + 3] = packed
    end
  elseif action == 'r' then
    -- The revival: rules::tracker::decide (Revive), then rules::tracker::revive.
    if rec and (rec.s == 'x' or (rec.s == 'f' and ARGV[b + 3] == '1')) then
      if ARGV[b + 4] == '1' then rec.a = 0 end
      rec.s = 'f'
      remember(rec, maxtl, now, 'r', rec.a)
      local packed = store(id, h, rec, where)
      index(3, was, id, rec.x, old)
      out[k + 1] = 1; out[k + 2] = ''; out[k + 3] = packed
    else
      out[k + 1] = 0; out[k + 2] = ''; out[k + 3] = raw
    end
  else
    redis.call('HDEL', KEYS[4], id)
    if where == 'b' then crec_lib().del(rst, id, h) end
    if staged then
      unstage(id)
      staged[id] = false
    end
    index(0, was, id, 0, old)
    out[k + 1] = 1; out[k + 2] = ''; out[k + 3] = raw
  end
end

-- Records of this call are in `fields`, not yet in the records hash: written first.
save(fields, #fields > 0 or cst ~= false)
compact_staged(n)
compact_save()
save(nil)
keep_alive(latest, w1, w2, w3, w5)
save(nil)
return out
