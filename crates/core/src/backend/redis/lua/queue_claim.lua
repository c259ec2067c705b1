-- Dedup Queue: claim up to ARGV[4] due ids of one shard, oldest first, for ARGV[5] ms, for the
-- owner token ARGV[3], unless the server's time is past ARGV[6] (ms, Redis's clock): the latest
-- start at which the caller still waits for the reply (see queue.rs). Reply after the head (see
-- queue_common.lua): the visibility deadline, then id and due time per claimed id; -1 alone when
-- too late (nothing claimed).
if now > tonumber(ARGV[6]) then return finish({0, 0, 0, -1}, had) end
reap(tonumber(ARGV[4]))
local deadline = now + tonumber(ARGV[5])
local out = {0, 0, 0, deadline}
if had then
  local ids = redis.call('ZRANGEBYSCORE', W, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, ARGV[4])
  for i = 1, #ids, 2 do
    local id = ids[i]
    redis.call('ZREM', W, id)
    redis.call('ZADD', C, fmt(deadline), id)
    redis.call('HSET', O, id, ARGV[3])
    out[#out + 1] = id
    out[#out + 1] = tonumber(ids[i + 1])
  end
end
return finish(out, had)
