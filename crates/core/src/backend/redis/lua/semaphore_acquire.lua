-- The Rust rule this script mirrors: rules::semaphore::acquire (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, permits, lease ms, label ('' = none), the fence counter's lifetime in ms
-- (FENCE_KEEP_MS); with a per-key limit also the key, the limit, and the start of every permit
-- key of this name ("…{sem:<name>}:p:", in KEYS[1]'s hash slot, read here by name as the
-- inspection reads them).
-- Reply: {1, holders, fence} | {0, holders, ms until the first lease ends, last fence} |
-- with a key {1, holders, fence, key holders} | {0, holders, ms until the first lease that would
-- make room ends, last fence, key holders} |
-- {-1, i}: KEYS[i] holds a value flowguard did not write (nothing changed, no fence issued).
-- A grant without a key runs 7 commands (TIME, ZREMRANGEBYSCORE, ZCARD, SET GET of the counter,
-- ZADD, SET, PEXPIREAT); with a key 2 more when something is held (ZRANGE, MGET).
-- A keyed permit's value is "<fence>k<key bytes>:<key>:<label>": the key's holders are the live
-- holders whose permit value has that key.
-- Ended entries first (their permit keys have expired by themselves): the rest are the live holders.
local swept = redis.pcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if failed(swept) then return {-1, 1} end
local n = redis.call('ZCARD', KEYS[1])
local key = ARGV[6]
local k, key_first = 0, nil
local tag = ''
if key then
  tag = 'k' .. #key .. ':' .. key .. ':'
  if n > 0 then
    local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    local names = {}
    for i = 1, #live, 2 do names[#names + 1] = ARGV[8] .. live[i] end
    local vals = redis.call('MGET', unpack(names))
    for i = 1, #names do
      local v = vals[i]
      -- A permit key that ended in the same ms as the clock read, or a foreign one, is no holder of the key.
      if type(v) == 'string' then
        local d = string.find(v, '%D')
        if d and string.sub(v, d, d + #tag - 1) == tag then
          k = k + 1
          local e = tonumber(live[2 * i])
          if not key_first or e < key_first then key_first = e end
        end
      end
    end
  end
end
local key_full = key and k >= tonumber(ARGV[7])
if n >= tonumber(ARGV[2]) or key_full then
  local f = last_fence()
  if not f then return {-1, 2} end
  if key_full then return {0, n, key_first - now, f, k} end
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if key then return {0, n, tonumber(first[2]) - now, f, k} end
  return {0, n, tonumber(first[2]) - now, f}
end
-- The token (fence_swap.lua, prepended): the counter swapped for the clock's, or the last + 1.
local f = fence_swap(KEYS[2], fence_clock(time), ARGV[5])
if not f then return {-1, 2} end
local fence = tonumber(f)
local e = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], e, ARGV[1])
if key then
  redis.call('SET', KEYS[3], f .. tag .. ARGV[4], 'PXAT', e - 1)
else
  redis.call('SET', KEYS[3], f .. ':' .. ARGV[4], 'PXAT', e - 1)
end
-- The holders' key lives as long as its longest lease. With no live holder it may take this
-- lease's end (the ended entries are gone); otherwise it already lives at least as long as
-- every live lease, so its lifetime only grows (GT).
if n == 0 then
  redis.call('PEXPIREAT', KEYS[1], e)
else
  redis.call('PEXPIREAT', KEYS[1], e, 'GT')
end
if key then return {1, n + 1, fence, k + 1} end
return {1, n + 1, fence}
