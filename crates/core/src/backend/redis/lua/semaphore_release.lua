-- The Rust rule this script mirrors: rules::semaphore::release (crates/core/src/rules/semaphore.rs).
-- ARGV: owner. Reply: 1 released | 0 not held (released, expired, never) | -i: KEYS[i] holds a
-- value flowguard did not write (nothing changed). Only the owner's own entry is touched: the
-- others' ended leases are dropped by the next acquire or extend.
local lease_end = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
if failed(lease_end) then return -1 end
if failed(redis.pcall('HDEL', KEYS[2], ARGV[1])) then return -2 end
if not lease_end then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(lease_end) <= now then return 0 end
return 1
