-- The Rust rule this script mirrors: rules::lock::acquire (crates/core/src/rules/lock.rs).
-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter (see lock.rs: made from the Redis clock in
-- microseconds and given its lifetime once, when INCR finds no counter; then only INCR). ARGV:
-- "<owner>:", lease ms, label ('' = none), the counter's lifetime in ms (FENCE_KEEP_MS).
-- Reply: the fence (acquired) | {"<fence>:<label>" of the holder, ms left} (held) |
-- {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
-- The usual case (a counter there) comes first and runs the fewest steps.
local fence = redis.pcall('INCR', KEYS[2])
if type(fence) ~= 'number' then return {false, 2} end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
if fence ~= 1 then
  if redis.call('SET', KEYS[1], ARGV[1] .. string.format('%d', fence) .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
    return fence
  end
  -- Held: give the number back, so the counter stays the last fence granted.
  redis.call('DECR', KEYS[2])
else
  local t = redis.call('TIME')
  fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local f = string.format('%d', fence)
  if redis.call('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
    redis.call('SET', KEYS[2], f, 'PX', ARGV[4])
    return fence
  end
  -- Held (the counter had expired during the hold): the next acquisition makes it again.
  redis.call('DEL', KEYS[2])
end
local v = redis.pcall('GET', KEYS[1])
local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
if not rest then return {false, 1} end
return {rest, redis.call('PTTL', KEYS[1])}
