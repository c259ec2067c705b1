-- Concurrency Lock: inspect. KEYS[1]: the lock; KEYS[2]: its fence counter.
-- Reply: {"<fence>:<label>" of the holder, ms left} | the last fence issued as text (false:
-- never), when free | {false, i}: KEYS[i] holds a value flowguard did not write.
local v = redis.pcall('GET', KEYS[1])
if v then
  local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
  if not rest then return {false, 1} end
  return {rest, redis.call('PTTL', KEYS[1])}
end
local f = redis.pcall('GET', KEYS[2])
if f and (type(f) ~= 'string' or not string.match(f, '^%d+$')) then return {false, 2} end
return f
