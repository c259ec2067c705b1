-- The Rust rule this script mirrors: rules::lock::extend (crates/core/src/rules/lock.rs).
-- Concurrency Lock: extend by the owner only. KEYS[1]: the lock. ARGV: owner, lease ms.
-- Reply: {1, lease ms} | {0, 0} not held | {-1, ms left} held by another owner | {-2, 0} the key
-- holds a value flowguard did not write (nothing changed).
local v = redis.pcall('GET', KEYS[1])
if not v then return {0, 0} end
if type(v) ~= 'string' or not string.match(v, '^[^:]+:%d+:') then return {-2, 0} end
if string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then return {-1, redis.call('PTTL', KEYS[1])} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tonumber(ARGV[2])}
