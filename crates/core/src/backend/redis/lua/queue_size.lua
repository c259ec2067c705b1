-- Dedup Queue: counts of one shard. Reply: the change of the shard's state (see tidy), waiting,
-- due now, claimed, enqueued again while claimed.
reap()
local out = {0, redis.call('ZCARD', W), redis.call('ZCOUNT', W, '-inf', fmt(now)), redis.call('ZCARD', C),
  redis.call('ZCARD', A)}
out[1] = tidy()
return out
