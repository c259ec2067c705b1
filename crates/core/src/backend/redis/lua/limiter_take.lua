-- Rate Limiter: take tokens by GCRA (as redis-cell does, without the module); the Rust rule is
-- rules::limiter::decide. KEYS[1]: the limiter's TAT, µs since the epoch on this server's clock,
-- as an integer string that expires when reached (an idle limiter holds no key); KEYS[2]: its
-- pause end (see limiter_pause.lua). ARGV: interval µs, burst, cost, max wait µs.
-- Reply: {1 allowed (or reserved) | 0 not, now µs, TAT before (never before the pause end),
-- pause end µs (0: none)} | {-1}: a key holds a value flowguard did not write (nothing changed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, burst, cost, max_wait =
  tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = now
local v = redis.pcall('GET', KEYS[1])
if v then
  if type(v) ~= 'string' or not string.match(v, '^%d+$') then return {-1} end
  tat = math.max(tonumber(v), now)
end
local pause = 0
local p = redis.pcall('GET', KEYS[2])
if p then
  if type(p) ~= 'string' or not string.match(p, '^%d+$') then return {-1} end
  if tonumber(p) > now then
    pause = tonumber(p)
    tat = math.max(tat, pause)
  end
end
local next = tat + cost * interval
local due = math.max(next - burst * interval, pause)
if due - now > max_wait then return {0, now, tat, pause} end
if cost > 0 then
  -- '%d': Lua would write a large number as '1.7e+15'.
  redis.call('SET', KEYS[1], string.format('%d', next), 'PX', math.ceil((next - now) / 1000))
end
return {1, now, tat, pause}
