-- The Rust rule this script mirrors: rules::state::live (crates/core/src/rules/state.rs).
-- Job State: read values. KEYS: the values. Reply: now, then per key the JSON (or false) and
-- the ms from now to its expiry (-1 no expiry, -2 absent), from the absolute expiry stored
-- (PEXPIRETIME; see state_set.lua), so now + it is the time written to the millisecond.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  out[#out + 1] = v
  if v then
    local left = redis.pcall('PEXPIRETIME', KEYS[i])
    if type(left) ~= 'number' then left = redis.call('PTTL', KEYS[i]) -- before Redis 7
    elseif left >= 0 then left = math.max(0, left - now) end
    out[#out + 1] = left
  else
    out[#out + 1] = -2
  end
end
return out
