-- The Rust rule this script mirrors: rules::semaphore::acquire (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, permits, lease ms, label ('' = none), the fence counter's lifetime in ms
-- (FENCE_KEEP_MS).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed, no fence issued).
-- A grant runs 6 commands (TIME, ZCOUNT, INCR, ZADD, SET, PEXPIREAT), one more every
-- 16th fence (the sweep of ended entries).
local n = redis.pcall('ZCOUNT', KEYS[1], '(' .. now, '+inf')
if failed(n) then return {-1, 1} end
if n >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local f = last_fence()
  if not f then return {-1, 2} end
  return {0, n, tonumber(first[2]) - now, f}
end
local counted = redis.pcall('INCR', KEYS[2])
if type(counted) ~= 'number' then return {-1, 2} end
-- No counter: one made from the clock in microseconds, given its lifetime once (as a lock's).
local fence = counted
if counted == 1 then
  fence = tonumber(time[1]) * 1000000 + tonumber(time[2])
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[5])
end
local e = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], e, ARGV[1])
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
redis.call('SET', KEYS[3], string.format('%d', fence) .. ':' .. ARGV[4], 'PXAT', e - 1)
-- The holders' key lives as long as its longest lease. With no live holder it may take this
-- lease's end (only ended entries are there); otherwise it already lives at least as long as
-- every live lease, so its lifetime only grows (GT).
if n == 0 then
  redis.call('PEXPIREAT', KEYS[1], e)
else
  redis.call('PEXPIREAT', KEYS[1], e, 'GT')
end
if fence % 16 == 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
return {1, n + 1, fence}
