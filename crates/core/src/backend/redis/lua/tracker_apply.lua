-- Item Tracker: apply a batch of operations to items of one group, atomically.
-- KEYS: the group (see tracker_common.lua).
-- ARGV[1]: retention ms; ARGV[2]: timeline length; then 5 per operation:
--   action (c = claim, d = completed, f = failed, u = unset), id, owner ('' = none),
--   number (claim: lease ms; completed/failed: how long to keep the record), text
--   (claim: '1' to re-claim a completed item; failed: the reason).
-- Reply: now, then per operation: 1 done | 0 busy | -1 refused, a word (busy: in_progress or
-- completed; refused: not_owner), the record after the operation (before it for unset, busy and
-- refused) or false.
local retention = tonumber(ARGV[1])
local maxtl = tonumber(ARGV[2])
local out = {now}
local latest = 0
local n = (#ARGV - 2) / 5
-- The bookkeeping and the first operation's record in one read.
local first = false
if n > 0 then
  local r = redis.call('HMGET', KEYS[4], META, ARGV[4])
  read_meta(r[1])
  first = r[2]
else
  read_meta(redis.call('HGET', KEYS[4], META))
end
purge(retention, math.max(100, 2 * n))

local function remember(tl, entry)
  tl[#tl + 1] = entry
  while #tl > maxtl do table.remove(tl, 1) end
end

-- Moves `id` to index `which` (0: none) from `was` (see decode: 0 none, -1 any).
local written = {}
local function index(which, was, id, score)
  written[which] = true
  for k = 1, 3 do
    if k ~= which and (was == k or was < 0) then redis.call('ZREM', KEYS[k], id) end
  end
  if which > 0 then
    redis.call('ZADD', KEYS[which], score, id)
    bound(which, score)
  end
end

-- Records written by this call, id -> JSON (false: deleted), stored by one HSET at the end.
local staged = {}
local function store(id, rec)
  local js = cjson.encode(rec)
  staged[id] = js
  if rec.x > latest then latest = rec.x end
  return js
end

for i = 0, n - 1 do
  local b = 3 + i * 5
  local action, id, owner, num, text = ARGV[b], ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4]
  local raw = staged[id]
  if raw == nil then
    if i == 0 then raw = first else raw = redis.call('HGET', KEYS[4], id) end
  end
  local rec, raw, was = decode(raw)
  if action == 'c' then
    if rec and rec.s == 'in_progress' and rec.l > now then
      out[#out + 1] = 0; out[#out + 1] = 'in_progress'; out[#out + 1] = raw
    elseif rec and rec.s == 'completed' and text ~= '1' then
      out[#out + 1] = 0; out[#out + 1] = 'completed'; out[#out + 1] = raw
    else
      if not rec then rec = {s = '', a = 0, l = 0, c = now, u = now, d = 0, x = 0, t = {}} end
      if type(rec.t) ~= 'table' then rec.t = {} end
      if rec.s == 'in_progress' then remember(rec.t, {t = rec.l, s = 'abandoned', a = rec.a}) end
      rec.a = rec.a + 1
      rec.s = 'in_progress'
      rec.o = owner
      rec.l = now + num
      rec.u = now
      rec.d = 0
      rec.x = rec.l + retention
      remember(rec.t, {t = now, s = 'in_progress', a = rec.a})
      local js = store(id, rec)
      index(1, was, id, rec.l)
      out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = js
    end
  elseif action == 'd' or action == 'f' then
    if owner ~= '' and (not rec or rec.o ~= owner) then
      out[#out + 1] = -1; out[#out + 1] = 'not_owner'; out[#out + 1] = raw
    else
      if not rec then rec = {s = '', a = 0, l = 0, c = now, u = now, d = 0, x = 0, t = {}} end
      if type(rec.t) ~= 'table' then rec.t = {} end
      local status = 'completed'
      local which = 2
      if action == 'f' then status = 'failed'; which = 3 end
      rec.s = status
      rec.l = 0
      rec.u = now
      rec.d = now
      rec.x = math.min(now + num, NEVER)
      if action == 'f' then
        rec.e = text
        remember(rec.t, {t = now, s = status, a = rec.a, e = text})
      else
        remember(rec.t, {t = now, s = status, a = rec.a})
      end
      local js = store(id, rec)
      index(which, was, id, rec.x)
      out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = js
    end
  else
    redis.call('HDEL', KEYS[4], id)
    staged[id] = false
    index(0, was, id, 0)
    out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = raw
  end
end

local fields = {}
for id, js in pairs(staged) do
  if js then fields[#fields + 1] = id; fields[#fields + 1] = js end
end
save(fields)
keep_alive(latest, written)
save({})
return out
