-- Concurrency Lock: release by the owner only. KEYS[1]: the lock. ARGV[1]: owner.
-- Reply: 1 released | 0 not held | -1 held by another owner.
local o = redis.call('HGET', KEYS[1], 'o')
if not o then return 0 end
if o ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
return 1
