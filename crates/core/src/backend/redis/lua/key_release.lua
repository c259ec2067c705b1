-- The Rust rule this script mirrors: rules::once::release (crates/core/src/rules/once.rs).
-- Job State, idempotency: free a pending key, only while ARGV[1] holds it.
-- Reply: 1 freed | 0 not pending under this owner.
local h = redis.call('HMGET', KEYS[1], 'o', 'v')
if h[2] or h[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
