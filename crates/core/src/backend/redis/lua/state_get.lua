-- Job State: read values. KEYS: the values. Reply: now, then per key the JSON (or false) and
-- its PTTL (-1 no expiry, -2 absent).
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  out[#out + 1] = v
  if v then out[#out + 1] = redis.call('PTTL', KEYS[i]) else out[#out + 1] = -2 end
end
return out
