-- The Rust rule this script mirrors: rules::semaphore::acquire (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, permits, lease ms, label ('' = none).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed, no fence issued).
clock()
local head, bad = sweep(first())
if not head then return {-1, bad} end
local n = redis.call('ZCARD', KEYS[1])
local v = info()
if not v then return {-1, 2} end
if n >= tonumber(ARGV[2]) then return {0, n, tonumber(head[2]) - now, v[1] or 0} end
-- No counter (a name new or whose keys expired): one made from the clock in microseconds.
local fence = v[1] and v[1] + 1 or tonumber(time[1]) * 1000000 + tonumber(time[2])
local lease = tonumber(ARGV[3])
local e = now + lease
local f = string.format('%d', fence)
local t = deadline(e, lease, v[2])
if t then
  redis.call('HSET', KEYS[2], ARGV[1], f .. ':' .. ARGV[4], 'fence', f, 'until', string.format('%d', t))
else
  redis.call('HSET', KEYS[2], ARGV[1], f .. ':' .. ARGV[4], 'fence', f)
end
redis.call('ZADD', KEYS[1], e, ARGV[1])
expire(t, v[2], n == 0)
return {1, n + 1, fence}
