-- The Rust rule this script mirrors: rules::semaphore::extend (crates/core/src/rules/semaphore.rs).
-- ARGV: owner, lease ms. Reply: 1 extended | 0 not held | -1: KEYS[1] holds a value flowguard did
-- not write (nothing changed).
local held = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
if failed(held) then return -1 end
-- Held: an entry whose lease holds by the clock, and its permit key (gone from the lease's end on).
if not held or tonumber(held) <= now then return 0 end
local e = now + tonumber(ARGV[2])
if redis.call('PEXPIREAT', KEYS[3], e - 1) == 0 then return 0 end
redis.call('ZADD', KEYS[1], 'XX', e, ARGV[1])
redis.call('PEXPIREAT', KEYS[1], e, 'GT')
return 1
