-- The Rust rule this script mirrors: rules::lock::acquire (crates/core/src/rules/lock.rs).
-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter, the last fence granted (see lock.rs). ARGV:
-- "<owner>:", lease ms, label ('' = none), the counter's lifetime in ms (FENCE_KEEP_MS).
-- A grant's fence is the larger of the counter + 1 and the Redis clock in microseconds: above
-- every fence granted before, even one a failover or restart lost from the counter (the clock
-- has moved past it since), as long as the clock does not go back.
-- Reply: the fence, a number or its digits (acquired) | {"<fence>:<label>" of the holder, ms
-- left} (held) | {false, i}: KEYS[i] holds a value flowguard did not write (nothing changed).
-- Three commands a grant (TIME, SET NX GET of the lock, SET GET of the counter) and three when
-- held (TIME, SET NX GET, PTTL): the lock is set with the clock's fence first and the counter
-- swapped for it, which tells the last fence; only when that was not below the clock's (the
-- clock went back, or two grants in one microsecond) are both written again with the counter + 1.
-- The clock's fence is kept as its 16 digits (seconds, then microseconds padded to 6) until
-- 2286: two such texts of one length compare as their numbers do, so the usual grant converts
-- nothing.
local t = redis.call('TIME')
local us = t[2]
local f = t[1] .. (#us == 6 and us or string.rep('0', 6 - #us) .. us)
-- NX with GET: sets the lock when there is none, else leaves it and replies its value (an error
-- for a key of another type).
local v = redis.pcall('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2], 'GET')
if v then
  local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
  if not rest then return {false, 1} end
  return {rest, redis.call('PTTL', KEYS[1])}
end
local c = redis.pcall('SET', KEYS[2], f, 'GET', 'KEEPTTL')
if type(c) == 'string' and #c == #f and c < f and string.find(c, '^%d+$') then return f end
if not c then
  -- No counter was there: it is made now, and given its lifetime once.
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return f
end
local last = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
if not last then
  -- A counter flowguard did not write: put back what was there (a key of another type was not
  -- written), and the lock is not taken.
  if type(c) == 'string' then redis.call('SET', KEYS[2], c, 'KEEPTTL') end
  redis.call('DEL', KEYS[1])
  return {false, 2}
end
local fence = tonumber(f)
if fence > last then return f end
-- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
f = string.format('%d', last + 1)
redis.call('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'PX', ARGV[2])
redis.call('SET', KEYS[2], f, 'KEEPTTL')
return f
