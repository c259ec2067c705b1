-- The Rust rule this script mirrors: rules::queue::live (crates/core/src/rules/queue.rs): an expired claim counts as waiting and due.
-- Dedup Queue: counts of one shard. Reply after the head (see queue_common.lua): waiting, due now,
-- claimed, enqueued again while claimed, dead letters (ZCARD of X only on a shard whose mark says
-- it may hold some). O(log n) after one reap slice: claims that expired and are
-- not returned yet count as waiting and due (their enqueue-again entries stay counted as such
-- until they are returned).
clock()
if not had then return finish({0, 0, 0, 0, 0, 0, 0, 0}, false) end
reap(0)
local now_s = fmt(now)
local expired = redis.call('ZCOUNT', C, '-inf', now_s)
local out = {0, 0, 0, redis.call('ZCARD', W) + expired, redis.call('ZCOUNT', W, '-inf', now_s) + expired,
  redis.call('ZCARD', C) - expired, redis.call('ZCARD', A), counted and redis.call('ZCARD', X) or 0}
return finish(out, true)
