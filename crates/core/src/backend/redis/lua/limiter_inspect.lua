-- Rate Limiter: read a limiter without changing it. KEYS[1]: the limiter's TAT (see
-- limiter_take.lua). Reply: {now µs} when absent, {now µs, TAT} | {-1}: the key holds a value
-- flowguard did not write.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.pcall('GET', KEYS[1])
if not v then return {now} end
if type(v) ~= 'string' or not string.match(v, '^%d+$') then return {-1} end
return {now, tonumber(v)}
