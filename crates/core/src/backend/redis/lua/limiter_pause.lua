-- Rate Limiter: pause a limiter; the Rust rule is rules::limiter::pause. KEYS[1]: the limiter's
-- TAT (see limiter_take.lua), kept at least until the pause end so the catalog lists the name
-- (a TAT of now equals none); KEYS[2]: the pause end, µs since the epoch on this server's clock,
-- an integer string that expires when reached. ARGV: 'at' and a time µs, or 'after' and µs after
-- now; the longest pause µs.
-- Reply: {1 stored | 0 kept (not ahead, or a longer pause) | 2 too far (nothing changed), now µs,
-- TAT (0: none), pause end (0: none), µs asked ahead} | {-1}: a key holds a value flowguard did
-- not write (nothing changed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local finish = tonumber(ARGV[2])
if ARGV[1] == 'after' then finish = now + finish end
local ahead, max = finish - now, tonumber(ARGV[3])
local tat, pause = 0, 0
local v = redis.pcall('GET', KEYS[1])
if v then
  if type(v) ~= 'string' or not string.match(v, '^%d+$') then return {-1} end
  tat = tonumber(v)
end
local p = redis.pcall('GET', KEYS[2])
if p then
  if type(p) ~= 'string' or not string.match(p, '^%d+$') then return {-1} end
  pause = tonumber(p)
end
if pause <= now then pause = 0 end
if ahead > max then return {2, now, tat, pause, math.min(ahead, 2 ^ 53)} end
if ahead <= 0 or pause >= finish then return {0, now, tat, pause, ahead} end
local px = math.ceil(ahead / 1000)
redis.call('SET', KEYS[2], string.format('%d', finish), 'PX', px)
if v then
  if redis.call('PTTL', KEYS[1]) < px then redis.call('PEXPIRE', KEYS[1], px) end
else
  redis.call('SET', KEYS[1], string.format('%d', now), 'PX', px)
end
return {1, now, tat, finish, ahead}
