-- The Rust rule this script mirrors: rules::semaphore::acquire (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, permits, lease ms, label ('' = none), the fence counter's lifetime in ms
-- (FENCE_KEEP_MS).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed, no fence issued).
local bad = sweep()
if bad then return {-1, bad} end
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local f = last_fence()
  if not f then return {-1, 3} end
  return {0, n, tonumber(first[2]) - now, f}
end
local counted = redis.pcall('INCR', KEYS[3])
if type(counted) ~= 'number' then return {-1, 3} end
-- No counter: one made from the clock in microseconds, given its lifetime once (as a lock's).
local fence = counted
if counted == 1 then fence = tonumber(time[1]) * 1000000 + tonumber(time[2]) end
if failed(redis.pcall('HSET', KEYS[2], ARGV[1], string.format('%d', fence) .. ':' .. ARGV[4])) then
  -- A foreign info key: the counter is put back as it was.
  if counted == 1 then redis.call('DEL', KEYS[3]) else redis.call('DECR', KEYS[3]) end
  return {-1, 2}
end
if counted == 1 then redis.call('SET', KEYS[3], string.format('%d', fence), 'PX', ARGV[5]) end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
keep(ARGV[3], n == 0)
return {1, n + 1, fence}
