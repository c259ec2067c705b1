-- Job State, idempotency: store the result, only while ARGV[1] holds the pending key.
-- ARGV: owner, result JSON, how long to keep it (ms). Reply: 1 stored | 0 not the owner.
local h = redis.call('HMGET', KEYS[1], 'o', 'v')
if h[2] or h[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
