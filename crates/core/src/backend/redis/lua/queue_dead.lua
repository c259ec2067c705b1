-- The Rust rule this script mirrors: none (a read of the dead letters rules::queue::deliver made).
-- Dedup Queue: the first ARGV[3] dead letters of one shard by the time they died (then id), with
-- their delivery counts. Reply after the head (see queue_common.lua): id, count and time per dead
-- letter. A shard whose mark says it holds none (no 'd') sends no command for them.
clock()
local out = {0, 0, 0}
if had and counted then
  local xs = redis.call('ZRANGE', X, 0, fmt(tonumber(ARGV[3]) - 1), 'WITHSCORES')
  if #xs > 0 then
    local ids = {}
    for i = 1, #xs, 2 do ids[#ids + 1] = xs[i] end
    local counts = redis.call('HMGET', D, unpack(ids))
    for i = 1, #ids do
      out[#out + 1] = ids[i]
      out[#out + 1] = tonumber(counts[i] or '0')
      out[#out + 1] = tonumber(xs[2 * i])
    end
  end
end
return finish(out, had)
