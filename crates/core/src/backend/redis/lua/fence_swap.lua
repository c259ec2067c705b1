-- A grant's fencing token (lock_acquire.lua, semaphore_acquire.lua; the rule is
-- rules::lock::next_fence): the larger of the last token + 1 and the Redis clock in microseconds,
-- so it is above every token handed out before, even one a failover or restart lost from the
-- counter (the clock has moved past it since), as long as the clock does not go back.
-- `fence_clock(t)`: the clock's token from a TIME reply, as its 16 digits (seconds, then
-- microseconds padded to 6) until 2286: two such texts of one length compare as their numbers
-- do, so the usual grant converts nothing.
-- `fence_swap(key, f, keep_ms)`: swaps the counter `key` (the last token granted) for `f` with one
-- SET GET, which tells the last token; only when that was not below `f` (the clock went back, or
-- two grants in one microsecond) is the counter written again, with the last + 1. A counter made
-- now is given its lifetime `keep_ms` once. Returns the token granted, as text; or false when the
-- counter holds a value flowguard did not write: then it is put back as it was (a key of another
-- type was not written).
local function fence_clock(t)
  local us = t[2]
  return t[1] .. (#us == 6 and us or string.rep('0', 6 - #us) .. us)
end
local function fence_swap(key, f, keep_ms)
  local c = redis.pcall('SET', key, f, 'GET', 'KEEPTTL')
  if type(c) == 'string' and #c == #f and c < f and string.find(c, '^%d+$') then return f end
  if not c then
    redis.call('PEXPIRE', key, keep_ms)
    return f
  end
  local last = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not last then
    if type(c) == 'string' then redis.call('SET', key, c, 'KEEPTTL') end
    return false
  end
  if tonumber(f) > last then return f end
  -- '%d', not concatenation: Lua turns a number into text with '%.14g' (1e14 would become '1e+14').
  f = string.format('%d', last + 1)
  redis.call('SET', key, f, 'KEEPTTL')
  return f
end
