-- Job State: write a value. KEYS[1]: the value. ARGV: JSON, expiry mode ('' none, 'in' ms from
-- now, 'at' ms since the epoch), its number, '1' to write only when absent.
-- Reply: {-1} expiresAt not in the future (nothing written) | {0, current JSON, its PTTL, now}
-- kept the existing value | {1, false, PTTL (-1 none), now} written.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = false
if ARGV[2] == 'in' then
  ms = tonumber(ARGV[3])
elseif ARGV[2] == 'at' then
  ms = tonumber(ARGV[3]) - now
  if ms <= 0 then return {-1} end
end
if ARGV[4] == '1' then
  local cur = redis.call('GET', KEYS[1])
  if cur then return {0, cur, redis.call('PTTL', KEYS[1]), now} end
end
if ms then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', string.format('%d', ms))
  return {1, false, ms, now}
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, false, -1, now}
