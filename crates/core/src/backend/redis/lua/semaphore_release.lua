-- Semaphore release (standalone: no shared head; the keys as in semaphore_common.lua).
-- The Rust rule this script mirrors: rules::semaphore::release (crates/core/src/rules/semaphore.rs).
-- ARGV: owner. Reply: 1 released | 0 not held (released, expired, never) | -i: KEYS[i] holds a
-- value flowguard did not write (nothing changed). Only the owner's own entry is touched: the
-- others' ended leases are dropped by the next acquire or extend. The keys keep their expiry;
-- the clock is read only when the owner has an entry.
local lease_end = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
if type(lease_end) == 'table' and lease_end.err then return -1 end
local gone = redis.pcall('HDEL', KEYS[2], ARGV[1])
if type(gone) == 'table' and gone.err then return -2 end
if not lease_end then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
local time = redis.call('TIME')
if tonumber(lease_end) <= tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) then return 0 end
return 1
