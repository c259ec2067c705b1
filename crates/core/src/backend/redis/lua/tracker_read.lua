-- Item Tracker: read records. KEYS[1]: the group's records; ARGV: ids.
-- Reply: now, then each record or false (a record whose expiry passed is dropped by the caller).
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for c = 1, #ARGV, 500 do
  local raws = redis.call('HMGET', KEYS[1], unpack(ARGV, c, math.min(c + 499, #ARGV)))
  for j = 1, #raws do out[#out + 1] = raws[j] end
end
return out
