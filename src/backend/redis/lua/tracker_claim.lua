-- Item Tracker: claim many items of one group under one owner token, atomically, with a compact
-- reply. The same rules as a claim of tracker_apply.lua, the same record shape and indexes.
-- KEYS[1..3]: the group's in_progress (score: lease end), completed and failed indexes.
-- ARGV[1]: retention ms; ARGV[2]: timeline length; ARGV[3]: owner; ARGV[4]: lease ms;
-- ARGV[5]: '1' to re-claim completed items; ARGV[6]: the record key head (the group's key +
-- ':i:'); ARGV[6+i]: id i. The record of id i is head .. id: it shares the indexes' hash tag,
-- so the same Cluster slot; not declared in KEYS, which would cost Redis a string per id.
-- Reply: now, a string with one character per id (c claimed, p in progress, d completed), and
-- the attempts of each id after the call.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention, maxtl, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local lease_end = now + tonumber(ARGV[4])
local reclaim = ARGV[5] == '1'
local expires = lease_end + retention
local ttl = expires - now
-- Numbers handed to redis.call as Lua numbers are formatted on every call: format them once.
local ttl_s, lease_end_s = string.format('%d', ttl), string.format('%d', lease_end)
local head = ARGV[6]
local n = #ARGV - 6
local CHUNK = 500

-- Every new item gets the same record: encode it once.
local fresh = cjson.encode({s = 'in_progress', a = 1, o = owner, l = lease_end, c = now, u = now, d = 0, x = expires,
  t = {{t = now, s = 'in_progress', a = 1}}})

local codes, attempts = {}, {}
local taken = {}   -- ids claimed by this call (a repeated id finds its first claim live)
local claimed = {} -- their ids, for the index updates
for c = 0, n - 1, CHUNK do
  local last = math.min(c + CHUNK, n)
  local keys = {}
  for i = c + 1, last do keys[#keys + 1] = head .. ARGV[6 + i] end
  local raws = redis.call('MGET', unpack(keys))
  for j = 1, last - c do
    local i = c + j
    local key, id, raw = keys[j], ARGV[6 + i], raws[j]
    if taken[key] then
      codes[i] = 'p'; attempts[i] = taken[key]
    elseif not raw then
      redis.call('SET', key, fresh, 'PX', ttl_s)
      codes[i] = 'c'; attempts[i] = 1
      taken[key] = 1; claimed[#claimed + 1] = id
    else
      local rec = cjson.decode(raw)
      if rec.s == 'in_progress' and rec.l > now then
        codes[i] = 'p'; attempts[i] = rec.a
      elseif rec.s == 'completed' and not reclaim then
        codes[i] = 'd'; attempts[i] = rec.a
      else
        local tl = rec.t
        if type(tl) ~= 'table' then tl = {} end
        if rec.s == 'in_progress' then tl[#tl + 1] = {t = rec.l, s = 'abandoned', a = rec.a} end
        rec.a = rec.a + 1
        tl[#tl + 1] = {t = now, s = 'in_progress', a = rec.a}
        while #tl > maxtl do table.remove(tl, 1) end
        rec.t = tl
        rec.s = 'in_progress'; rec.o = owner; rec.l = lease_end; rec.u = now; rec.d = 0; rec.x = expires
        redis.call('SET', key, cjson.encode(rec), 'PX', ttl_s)
        codes[i] = 'c'; attempts[i] = rec.a
        taken[key] = rec.a; claimed[#claimed + 1] = id
      end
    end
  end
end

-- The claimed ids move to the in_progress index (out of completed / failed, where a record that
-- was deleted behind our back may have left them).
for c = 1, #claimed, CHUNK do
  local last = math.min(c + CHUNK - 1, #claimed)
  local args = {}
  for k = c, last do args[#args + 1] = lease_end_s; args[#args + 1] = claimed[k] end
  redis.call('ZADD', KEYS[1], unpack(args))
  redis.call('ZREM', KEYS[2], unpack(claimed, c, last))
  redis.call('ZREM', KEYS[3], unpack(claimed, c, last))
end
if #claimed > 0 then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == -1 or (pttl >= 0 and pttl < ttl) then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return {now, table.concat(codes), attempts}
