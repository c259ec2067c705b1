-- Concurrency Lock: inspect. KEYS[1]: the lock; KEYS[2]: its fence counter.
-- Reply: 1, fence, ms left, label | 0, last fence issued (0: never), 0, false.
local h = redis.call('HMGET', KEYS[1], 'f', 'n')
if h[1] then
  return {1, tonumber(h[1]), redis.call('PTTL', KEYS[1]), h[2]}
end
return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), 0, false}
