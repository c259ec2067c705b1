-- The Rust rule this script mirrors: rules::state::increment (crates/core/src/rules/state.rs).
-- Job State: add ARGV[1] to an integer counter (absent counts as 0); ARGV[2]: TTL ms applied
-- when the key has no expiry ('' none). Reply: {1, new value} | {-1} the value is not an
-- integer | {-2} the result would leave the safe integer range. Nothing is written on -1 or -2.
local max = 9007199254740991
local v = redis.call('GET', KEYS[1])
local cur = 0
if v then
  if v ~= '0' and not string.match(v, '^%-?[1-9]%d*$') then return {-1} end
  cur = tonumber(v)
end
local by = tonumber(ARGV[1])
if math.abs(cur) > max or math.abs(cur + by) > max then return {-2} end
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then
  -- An absolute expiry from TIME, as state_set.lua writes them (read back to the millisecond).
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', now + tonumber(ARGV[2])))
end
return {1, n}
