-- Reply: {last fence, "<fence>:<label>", ms left, …} for the live holders, first lease end
-- first | {-1, i}: KEYS[i] holds a value flowguard did not write.
local bad = foreign()
if bad then return {-1, bad} end
local f = redis.pcall('GET', KEYS[3])
if f and (type(f) ~= 'string' or not string.match(f, '^%d+$')) then return {-1, 3} end
local out = {tonumber(f or '0')}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or '0:'
  out[#out + 1] = tonumber(live[i + 1]) - now
end
return out
