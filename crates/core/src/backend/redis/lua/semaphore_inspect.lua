-- Reply: {last fence, "<fence>:<label>", ms left, …} for the live holders, first lease end
-- first | {-1, i}: KEYS[i] holds a value flowguard did not write. Not a hot path: each key's
-- type is checked, so a foreign key is named even while nothing is held.
for i = 1, 2 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= (i == 1 and 'zset' or 'hash') then return {-1, i} end
end
local f = last_fence()
if not f then return {-1, 3} end
local out = {f}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or '0:'
  out[#out + 1] = tonumber(live[i + 1]) - now
end
return out
