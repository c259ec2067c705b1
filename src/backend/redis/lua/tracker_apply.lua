-- Item Tracker: apply a batch of operations to items of one group, atomically.
-- KEYS[1..3]: the group's index of in_progress (score: lease end), completed and failed
--             (score: when the record expires); KEYS[3+i]: the record of operation i.
-- ARGV[1]: retention ms; ARGV[2]: timeline length; then 5 per operation:
--   action (c = claim, d = completed, f = failed, u = unset), id, owner ('' = none),
--   number (claim: lease ms; completed/failed: how long to keep the record), text
--   (claim: '1' to re-claim a completed item; failed: the reason).
-- Reply: now, then per operation: 1 done | 0 busy | -1 refused, a word (busy: in_progress or
-- completed; refused: not_owner), the record after the operation (before it for unset, busy and
-- refused) or false.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = tonumber(ARGV[1])
local maxtl = tonumber(ARGV[2])
local out = {now}
local latest = {0, 0, 0}

local function remember(tl, entry)
  tl[#tl + 1] = entry
  while #tl > maxtl do table.remove(tl, 1) end
end

local function index(which, id, score, expires)
  for k = 1, 3 do
    if k ~= which then redis.call('ZREM', KEYS[k], id) end
  end
  if which > 0 then
    redis.call('ZADD', KEYS[which], score, id)
    if expires > latest[which] then latest[which] = expires end
  end
end

local n = (#ARGV - 2) / 5
for i = 0, n - 1 do
  local b = 3 + i * 5
  local action, id, owner, num, text = ARGV[b], ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4]
  local key = KEYS[4 + i]
  local raw = redis.call('GET', key)
  local rec = false
  if raw then rec = cjson.decode(raw) end
  if action == 'c' then
    if rec and rec.s == 'in_progress' and rec.l > now then
      out[#out + 1] = 0; out[#out + 1] = 'in_progress'; out[#out + 1] = raw
    elseif rec and rec.s == 'completed' and text ~= '1' then
      out[#out + 1] = 0; out[#out + 1] = 'completed'; out[#out + 1] = raw
    else
      if not rec then rec = {s = '', a = 0, l = 0, c = now, u = now, d = 0, x = 0, t = {}} end
      if rec.s == 'in_progress' then remember(rec.t, {t = rec.l, s = 'abandoned', a = rec.a}) end
      rec.a = rec.a + 1
      rec.s = 'in_progress'
      rec.o = owner
      rec.l = now + num
      rec.u = now
      rec.d = 0
      rec.x = rec.l + retention
      remember(rec.t, {t = now, s = 'in_progress', a = rec.a})
      local js = cjson.encode(rec)
      redis.call('SET', key, js, 'PX', rec.x - now)
      index(1, id, rec.l, rec.x)
      out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = js
    end
  elseif action == 'd' or action == 'f' then
    if owner ~= '' and (not rec or rec.o ~= owner) then
      out[#out + 1] = -1; out[#out + 1] = 'not_owner'; out[#out + 1] = raw
    else
      if not rec then rec = {s = '', a = 0, l = 0, c = now, u = now, d = 0, x = 0, t = {}} end
      local status = 'completed'
      local which = 2
      if action == 'f' then status = 'failed'; which = 3 end
      rec.s = status
      rec.l = 0
      rec.u = now
      rec.d = now
      rec.x = now + num
      if action == 'f' then
        rec.e = text
        remember(rec.t, {t = now, s = status, a = rec.a, e = text})
      else
        remember(rec.t, {t = now, s = status, a = rec.a})
      end
      local js = cjson.encode(rec)
      redis.call('SET', key, js, 'PX', num)
      index(which, id, rec.x, rec.x)
      out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = js
    end
  else
    if raw then redis.call('DEL', key) end
    index(0, id, 0, 0)
    out[#out + 1] = 1; out[#out + 1] = ''; out[#out + 1] = raw
  end
end

-- An index lives as long as the longest-lived record it lists, so a group nobody touches again
-- disappears with its records.
for k = 1, 3 do
  if latest[k] > 0 then
    local want = latest[k] - now
    local pttl = redis.call('PTTL', KEYS[k])
    if pttl == -1 or (pttl >= 0 and pttl < want) then redis.call('PEXPIRE', KEYS[k], want) end
  end
end
return out
