-- The Rust rule this script mirrors: rules::lock::acquire (crates/core/src/rules/lock.rs).
-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter, the last fence granted (see lock.rs). ARGV:
-- "<owner>:", lease ms, label ('' = none), the counter's lifetime in ms (FENCE_KEEP_MS).
-- A grant's fence is the larger of the counter + 1 and the Redis clock in microseconds: above
-- every fence granted before, even one a failover or restart lost from the counter (the clock
-- has moved past it since), as long as the clock does not go back.
-- Reply: the fence (acquired) | {"<fence>:<label>" of the holder, ms left} (held) |
-- {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
local c = redis.pcall('GET', KEYS[2])
local last = 0
if c then
  last = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not last then return {false, 2} end
end
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence <= last then fence = last + 1 end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
local f = string.format('%d', fence)
if redis.call('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  if c then
    redis.call('SET', KEYS[2], f, 'KEEPTTL')
  else
    -- No counter was there: it is made now, and given its lifetime once.
    redis.call('SET', KEYS[2], f, 'PX', ARGV[4])
  end
  return fence
end
local v = redis.pcall('GET', KEYS[1])
local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
if not rest then return {false, 1} end
return {rest, redis.call('PTTL', KEYS[1])}
