-- Dedup Queue: counts of one shard. Reply: the change of the shard's state (see tidy), waiting,
-- due now, claimed, enqueued again while claimed. O(log n) after one reap slice: claims that
-- expired and are not returned yet count as waiting and due (their enqueue-again entries stay
-- counted as such until they are returned).
reap(0)
local now_s = fmt(now)
local expired = redis.call('ZCOUNT', C, '-inf', now_s)
local out = {0, redis.call('ZCARD', W) + expired, redis.call('ZCOUNT', W, '-inf', now_s) + expired,
  redis.call('ZCARD', C) - expired, redis.call('ZCARD', A)}
out[1] = tidy()
return out
