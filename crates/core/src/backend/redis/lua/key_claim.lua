-- The Rust rule this script mirrors: rules::once::claim (crates/core/src/rules/once.rs).
-- Job State, idempotency: take a key when free. KEYS[1]: the key (hash: o = owner token while
-- pending, v = the stored result once done). ARGV: owner, lease ms.
-- Reply: {1, false, lease ms, now} claimed | {0, false, ms left, now} pending under another
-- owner | {2, result JSON, ms from now to its expiry, now} done (from the absolute expiry
-- stored, PEXPIRETIME, so now + it is the time key_complete.lua wrote to the millisecond).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'o', 'v')
if h[2] then
  local left = redis.pcall('PEXPIRETIME', KEYS[1])
  if type(left) ~= 'number' then left = redis.call('PTTL', KEYS[1]) -- before Redis 7
  elseif left >= 0 then left = math.max(0, left - now) end
  return {2, h[2], left, now}
end
if h[1] then return {0, false, redis.call('PTTL', KEYS[1]), now} end
redis.call('HSET', KEYS[1], 'o', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, false, tonumber(ARGV[2]), now}
