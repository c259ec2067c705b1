-- Dedup Queue: the queue's record, alone in the queue's own hash slot. KEYS[1]: a hash, absent
-- while the queue is empty: n = the shard count the queue holds ids for; k = how many of its
-- shards hold ids (those with a mark, see queue_common.lua), plus the enqueues under way onto a
-- shard without mark (such an enqueue reserves one before its shard step, which turns it into the
-- shard's own or gives it back, so the count cannot change between this check and its write).
-- ARGV[1]: the caller's shard count; ARGV[2]: 'check', 'reserve' or 'settle'; ARGV[3]: for
-- settle, the change of k. Reply: {1}, or {0, the queue's shard count} when the caller's differs
-- while the queue holds ids or an enqueue is under way (nothing changed).
if ARGV[2] == 'settle' then
  if redis.call('HINCRBY', KEYS[1], 'k', ARGV[3]) <= 0 then redis.call('DEL', KEYS[1]) end
  return {1}
end
local m = redis.call('HMGET', KEYS[1], 'n', 'k')
if m[1] and m[1] ~= ARGV[1] and tonumber(m[2] or '0') > 0 then return {0, m[1]} end
if ARGV[2] == 'reserve' then
  redis.call('HSET', KEYS[1], 'n', ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'k', 1)
end
return {1}
