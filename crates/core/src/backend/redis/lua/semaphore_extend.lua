-- The Rust rule this script mirrors: rules::semaphore::extend (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, lease ms. Reply: 1 extended | 0 not held | -i: KEYS[i] holds a value flowguard did
-- not write (nothing changed).
clock()
local head, bad = sweep(first())
if not head then return -bad end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local v = info()
if not v then return -2 end
local lease = tonumber(ARGV[2])
local e = now + lease
local t = deadline(e, lease, v[2])
if t then redis.call('HSET', KEYS[2], 'until', string.format('%d', t)) end
redis.call('ZADD', KEYS[1], 'XX', e, ARGV[1])
expire(t, v[2], false)
return 1
