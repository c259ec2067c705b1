-- Concurrency Lock: inspect. KEYS[1]: the lock; KEYS[2]: its fence counter.
-- Reply: {"<fence>:<label>" of the holder, ms left} | the last fence issued (0: never), when free.
local v = redis.call('GET', KEYS[1])
if v then
  return {string.sub(v, (string.find(v, ':', 1, true) or 0) + 1), redis.call('PTTL', KEYS[1])}
end
return tonumber(redis.call('GET', KEYS[2]) or '0')
