-- ARGV: the start of every permit key of this name ("…{sem:<name>}:p:"; the permit keys are in
-- KEYS[1]'s hash slot, read here by name: their owners are known only from KEYS[1]).
-- Reply: {last fence, "<fence>:<label>", ms left, …} for the live holders, first lease end
-- first | {-1, i}: KEYS[i] holds a value flowguard did not write | {-1, 3}: a permit key does.
-- Not a hot path: the holders' key's type is checked, so a foreign key is named even while
-- nothing is held.
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'zset' then return {-1, 1} end
local f = last_fence()
if not f then return {-1, 2} end
local out = {f}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local v = redis.pcall('GET', ARGV[1] .. live[i])
  if failed(v) then return {-1, 3} end
  -- A permit key that ended in the same ms as the clock read: not a live holder.
  if v then
    out[#out + 1] = v
    out[#out + 1] = tonumber(live[i + 1]) - now
  end
end
return out
