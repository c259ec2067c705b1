-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter (never expires, so fencing tokens strictly
-- increase across releases and expiries; exact up to 2^53). ARGV: owner, lease ms, label
-- ('' = none). Reply: the fence (acquired) | {"<fence>:<label>" of the holder, ms left} (held) |
-- {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
local fence = redis.pcall('INCR', KEYS[2])
if type(fence) ~= 'number' then return {false, 2} end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
local value = ARGV[1] .. ':' .. string.format('%d', fence) .. ':' .. ARGV[3]
if redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2]) then
  return fence
end
-- Held: give the number back, so the counter stays the last fence granted.
redis.call('DECR', KEYS[2])
local v = redis.pcall('GET', KEYS[1])
local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
if not rest then return {false, 1} end
return {rest, redis.call('PTTL', KEYS[1])}
