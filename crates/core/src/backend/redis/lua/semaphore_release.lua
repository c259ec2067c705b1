-- Semaphore release (standalone: no shared head, no clock; the keys as in semaphore_common.lua).
-- The Rust rule this script mirrors: rules::semaphore::release (crates/core/src/rules/semaphore.rs).
-- ARGV: owner. Reply: 1 released | 0 not held (released, expired, never: the permit key is gone)
-- | -1: KEYS[1] holds a value flowguard did not write (nothing changed). Only the owner's own
-- entry is touched: the others' ended entries are dropped by a later acquisition.
local r = redis.pcall('ZREM', KEYS[1], ARGV[1])
if type(r) == 'table' and r.err then return -1 end
return redis.call('DEL', KEYS[3])
