-- Concurrency Lock: acquire. KEYS[1]: the lock (hash o = owner, f = fence, n = label);
-- KEYS[2]: the lock's fence counter (never expires, so fencing tokens strictly increase).
-- ARGV: owner, lease ms, label ('' = none).
-- Reply: 1, fence, lease ms, label | 0, the holder's fence, ms left, the holder's label.
local h = redis.call('HMGET', KEYS[1], 'o', 'f', 'n')
if h[1] then
  return {0, tonumber(h[2]), redis.call('PTTL', KEYS[1]), h[3]}
end
local fence = redis.call('INCR', KEYS[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', fence, 'n', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', fence)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence, tonumber(ARGV[2]), ARGV[3]}
