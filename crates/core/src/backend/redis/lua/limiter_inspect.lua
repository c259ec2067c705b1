-- Rate Limiter: read a limiter without changing it. KEYS[1]: the limiter's TAT, KEYS[2]: its
-- pause end (see limiter_take.lua). Reply: {now µs, TAT (0: absent), pause end (0: absent)} |
-- {-1}: a key holds a value flowguard did not write.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local reply = {now, 0, 0}
for i = 1, 2 do
  local v = redis.pcall('GET', KEYS[i])
  if v then
    if type(v) ~= 'string' or not string.match(v, '^%d+$') then return {-1} end
    reply[i + 1] = tonumber(v)
  end
end
return reply
