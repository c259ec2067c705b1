-- The Rust rule this script mirrors: rules::lock::release (crates/core/src/rules/lock.rs).
-- Concurrency Lock: release by the owner only. KEYS[1]: the lock. ARGV[1]: "<owner>:".
-- Reply: 1 released | 0 not held | -1 held by another owner | -2 the key holds a value
-- flowguard did not write (nothing changed).
local v = redis.pcall('GET', KEYS[1])
if not v then return 0 end
-- The usual case first: the caller's own lock. Its owner token is 128 random bits, checked
-- (token.rs) before the call: no value flowguard did not write starts with it.
if type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if type(v) ~= 'string' or not string.match(v, '^[^:]+:%d+:') then return -2 end
return -1
