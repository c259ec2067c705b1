-- Dedup Queue: claim up to ARGV[3] due ids of one shard, oldest first, for ARGV[4] ms, for the
-- owner token ARGV[2], unless the server's time is past ARGV[5] (ms, Redis's clock): the latest
-- start at which the caller still waits for the reply (see queue.rs). Reply: the change of the
-- shard's state (see tidy), the visibility deadline, then id and due time per claimed id; {0, -1}
-- when too late (nothing changed, nothing claimed).
if now > tonumber(ARGV[5]) then return {0, -1} end
reap(tonumber(ARGV[3]))
local deadline = now + tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', W, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, ARGV[3])
local out = {1, deadline}
for i = 1, #ids, 2 do
  local id = ids[i]
  redis.call('ZREM', W, id)
  redis.call('ZADD', C, fmt(deadline), id)
  redis.call('HSET', O, id, ARGV[2])
  out[#out + 1] = id
  out[#out + 1] = tonumber(ids[i + 1])
end
out[1] = tidy()
return out
