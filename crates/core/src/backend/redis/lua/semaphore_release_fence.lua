-- The Rust rule this script mirrors: rules::semaphore::release_fence (crates/core/src/rules/semaphore.rs).
-- ARGV: the fence, the start of every permit key of this name (as semaphore_inspect.lua).
-- Reply: 1 released | 0 not held (no live permit has that fence) | -1: KEYS[1] holds a value
-- flowguard did not write (nothing changed). Not a hot path: reads each live holder's permit.
local live = redis.pcall('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
if failed(live) then return -1 end
for i = 1, #live do
  local v = redis.pcall('GET', ARGV[2] .. live[i])
  if type(v) == 'string' and string.match(v, '^%d+') == ARGV[1] then
    redis.call('ZREM', KEYS[1], live[i])
    redis.call('DEL', ARGV[2] .. live[i])
    return 1
  end
end
return 0
