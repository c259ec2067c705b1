-- The Rust rule this script mirrors: rules::semaphore::extend (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, lease ms. Reply: 1 extended | 0 not held | -i: KEYS[i] holds a value flowguard did
-- not write (nothing changed).
local bad = sweep()
if bad then return -bad end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep(ARGV[2], false)
return 1
