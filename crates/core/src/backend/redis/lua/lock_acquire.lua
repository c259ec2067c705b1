-- Concurrency Lock: acquire. KEYS[1]: the lock, one string "<owner>:<fence>:<label>" whose expiry
-- is the lease; KEYS[2]: the lock's fence counter (never expires, so fencing tokens strictly
-- increase across releases and expiries). ARGV: owner, lease ms, label ('' = none).
-- Reply: the fence (acquired) | {"<fence>:<label>" of the holder, ms left} (held).
local fence = redis.call('INCR', KEYS[2])
if redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  return fence
end
-- Held: give the number back, so the counter stays the last fence granted.
redis.call('DECR', KEYS[2])
local v = redis.call('GET', KEYS[1]) or ''
return {string.sub(v, #ARGV[1] + 2), redis.call('PTTL', KEYS[1])}
