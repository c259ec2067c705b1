-- The Rust rule this script mirrors: rules::once::complete (crates/core/src/rules/once.rs).
-- Job State, idempotency: store the result, only while ARGV[1] holds the pending key.
-- ARGV: owner, result JSON, how long to keep it (ms). Reply: 1 stored | 0 not the owner.
local h = redis.call('HMGET', KEYS[1], 'o', 'v')
if h[2] or h[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2])
-- An absolute expiry from TIME, read back to the millisecond by key_claim.lua.
local t = redis.call('TIME')
redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])))
return 1
