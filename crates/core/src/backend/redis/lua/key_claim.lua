-- Job State, idempotency: take a key when free. KEYS[1]: the key (hash: o = owner token while
-- pending, v = the stored result once done). ARGV: owner, lease ms.
-- Reply: {1, false, lease ms, now} claimed | {0, false, ms left, now} pending under another
-- owner | {2, result JSON, PTTL, now} done.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'o', 'v')
if h[2] then return {2, h[2], redis.call('PTTL', KEYS[1]), now} end
if h[1] then return {0, false, redis.call('PTTL', KEYS[1]), now} end
redis.call('HSET', KEYS[1], 'o', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, false, tonumber(ARGV[2]), now}
