-- The Rust rule this script mirrors: rules::lock::release_fence (crates/core/src/rules/lock.rs).
-- Concurrency Lock: an operator's release of the grant with a given fencing token, whoever owns
-- it. KEYS[1]: the lock ("<owner>:<fence>:<label>", its PX expiry the lease). ARGV[1]: the fence.
-- Reply: 1 released | 0 not held | -1 held by another grant | -2 the key holds a value
-- flowguard did not write (nothing changed).
local v = redis.pcall('GET', KEYS[1])
if not v then return 0 end
if type(v) ~= 'string' then return -2 end
local fence = string.match(v, '^[^:]+:(%d+):')
if not fence then return -2 end
if fence ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
return 1
