-- The Rust rule this script mirrors: rules::semaphore::acquire (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, permits, lease ms, label ('' = none), the fence counter's lifetime in ms
-- (FENCE_KEEP_MS).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed, no fence issued).
-- A grant runs 8 commands (TIME, ZREMRANGEBYSCORE, ZCARD, GET and SET of the counter, ZADD, SET,
-- PEXPIREAT).
-- Ended entries first (their permit keys have expired by themselves): the rest are the live holders.
local swept = redis.pcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if failed(swept) then return {-1, 1} end
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local f = last_fence()
  if not f then return {-1, 2} end
  return {0, n, tonumber(first[2]) - now, f}
end
local c = redis.pcall('GET', KEYS[2])
local last = 0
if c then
  last = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not last then return {-1, 2} end
end
-- The larger of the counter + 1 and the clock in microseconds, as a lock's (lock_acquire.lua):
-- above every fence granted before, even one a failover or restart lost from the counter.
local fence = tonumber(time[1]) * 1000000 + tonumber(time[2])
if fence <= last then fence = last + 1 end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
local f = string.format('%d', fence)
if c then
  redis.call('SET', KEYS[2], f, 'KEEPTTL')
else
  -- No counter was there: made now, and given its lifetime once.
  redis.call('SET', KEYS[2], f, 'PX', ARGV[5])
end
local e = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], e, ARGV[1])
redis.call('SET', KEYS[3], f .. ':' .. ARGV[4], 'PXAT', e - 1)
-- The holders' key lives as long as its longest lease. With no live holder it may take this
-- lease's end (the ended entries are gone); otherwise it already lives at least as long as
-- every live lease, so its lifetime only grows (GT).
if n == 0 then
  redis.call('PEXPIREAT', KEYS[1], e)
else
  redis.call('PEXPIREAT', KEYS[1], e, 'GT')
end
return {1, n + 1, fence}
