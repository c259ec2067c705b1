-- The Rust rule this script mirrors: rules::state::set (crates/core/src/rules/state.rs).
-- Job State: write a value. KEYS[1]: the value. ARGV: JSON, expiry mode ('' none, 'in' ms from
-- now, 'at' ms since the epoch), its number, '1' to write only when absent.
-- Reply: {-1} expiresAt not in the future (nothing written) | {0, current JSON, ms from now to
-- its expiry (-1 none), now} kept the existing value | {1, false, the same for the value
-- written, now} written.
-- Expiries are written and read as absolute times against `now` (PEXPIREAT, PEXPIRETIME), so
-- now + the reply is the time stored to the millisecond: PX and PTTL count from the server's
-- command clock, which can be a millisecond off the TIME read here.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = false
if ARGV[2] == 'in' then
  at = now + tonumber(ARGV[3])
elseif ARGV[2] == 'at' then
  at = tonumber(ARGV[3])
  if at <= now then return {-1} end
end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  local left = redis.pcall('PEXPIRETIME', KEYS[1])
  if type(left) ~= 'number' then left = redis.call('PTTL', KEYS[1]) -- before Redis 7
  elseif left >= 0 then left = math.max(0, left - now) end
  return {0, redis.call('GET', KEYS[1]), left, now}
end
redis.call('SET', KEYS[1], ARGV[1])
if at then
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', at))
  return {1, false, at - now, now}
end
return {1, false, -1, now}
