-- Dedup Queue: counts of one shard. Reply: 1, waiting, due now, claimed, enqueued again while claimed.
local bad = wrong_shards()
if bad then return {0, bad} end
reap()
local out = {1, redis.call('ZCARD', W), redis.call('ZCOUNT', W, '-inf', fmt(now)), redis.call('ZCARD', C), redis.call('ZCARD', A)}
tidy()
return out
