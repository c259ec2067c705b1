-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter, kept FENCE_KEEP_MS (lock.rs) past the lease on
-- every acquisition, so fencing tokens strictly increase across releases and expiries for a lock
-- name used at least once in that time (exact up to 2^53); a name unused longer starts again at
-- 1, and its key is given back. ARGV: owner, lease ms, label ('' = none), the counter's lifetime
-- in ms (lease + FENCE_KEEP_MS, computed by the caller: no arithmetic or formatting here).
-- Reply: the fence (acquired) | {"<fence>:<label>" of the holder, ms left} (held) |
-- {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
local fence = redis.pcall('INCR', KEYS[2])
if type(fence) ~= 'number' then return {false, 2} end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
if redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', fence) .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return fence
end
-- Held: give the number back, so the counter stays the last fence granted (none: it had expired
-- during a hold longer than FENCE_KEEP_MS, and was made anew by INCR without a TTL).
if redis.call('DECR', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end
local v = redis.pcall('GET', KEYS[1])
local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
if not rest then return {false, 1} end
return {rest, redis.call('PTTL', KEYS[1])}
