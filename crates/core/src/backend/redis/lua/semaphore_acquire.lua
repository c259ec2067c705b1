-- ARGV: owner, permits, lease ms, label ('' = none), the fence counter's lifetime in ms
-- (FENCE_KEEP_MS).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
local bad = foreign()
if bad then return {-1, bad} end
sweep()
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local f = redis.pcall('GET', KEYS[3])
  if f and (type(f) ~= 'string' or not string.match(f, '^%d+$')) then return {-1, 3} end
  return {0, n, tonumber(first[2]) - now, tonumber(f or '0')}
end
local fence = redis.pcall('INCR', KEYS[3])
if type(fence) ~= 'number' then return {-1, 3} end
if fence == 1 then
  -- No counter: one made from the clock in microseconds, given its lifetime once (as a lock's).
  fence = tonumber(time[1]) * 1000000 + tonumber(time[2])
  redis.call('SET', KEYS[3], string.format('%d', fence), 'PX', ARGV[5])
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', fence) .. ':' .. ARGV[4])
keep()
return {1, n + 1, fence}
