-- ARGV: owner. Reply: 1 released | 0 not held (released, expired, never) | -1: a key holds a
-- value flowguard did not write (nothing changed).
if foreign() then return -1 end
sweep()
local n = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return n
