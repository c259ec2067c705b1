-- Item Tracker: read records. KEYS: the records. Reply: now, then each record or false.
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for i = 1, #KEYS do out[i + 1] = redis.call('GET', KEYS[i]) end
return out
