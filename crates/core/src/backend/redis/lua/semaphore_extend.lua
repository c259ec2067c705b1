-- ARGV: owner, lease ms. Reply: 1 extended | 0 not held | -1: a key holds a value flowguard did
-- not write (nothing changed).
if foreign() then return -1 end
sweep()
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep()
return 1
