-- The Rust rule this script mirrors: rules::lock::acquire (crates/core/src/rules/lock.rs).
-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter, the last fence granted (see lock.rs). ARGV:
-- "<owner>:", lease ms, label ('' = none), the counter's lifetime in ms (FENCE_KEEP_MS).
-- Reply: the fence as its digits (acquired) | {"<fence>:<label>" of the holder, ms
-- left} (held) | {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
-- Three commands a grant (TIME, SET NX GET of the lock, SET GET of the counter: fence_swap.lua,
-- prepended) and three when held (TIME, SET NX GET, PTTL): the lock is set with the clock's token
-- first; when the counter says a later one is due, the lock is written again with it.
local f = fence_clock(redis.call('TIME'))
-- NX with GET: sets the lock when there is none, else leaves it and replies its value (an error
-- for a key of another type).
local v = redis.pcall('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2], 'GET')
if v then
  local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
  if not rest then return {false, 1} end
  return {rest, redis.call('PTTL', KEYS[1])}
end
local g = fence_swap(KEYS[2], f, ARGV[4])
if not g then
  -- A counter flowguard did not write: the lock is not taken.
  redis.call('DEL', KEYS[1])
  return {false, 2}
end
if g ~= f then redis.call('SET', KEYS[1], ARGV[1] .. g .. ':' .. ARGV[3], 'PX', ARGV[2]) end
return g
