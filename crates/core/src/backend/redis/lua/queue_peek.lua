-- Dedup Queue: the first ARGV[3] waiting ids of one shard by due time, without claiming.
-- Reply after the head (see queue_common.lua): id and due time per id.
clock()
reap(tonumber(ARGV[3]))
local out = {0, 0, 0}
if had then
  local ids = redis.call('ZRANGE', W, 0, fmt(tonumber(ARGV[3]) - 1), 'WITHSCORES')
  for i = 1, #ids, 2 do
    out[#out + 1] = ids[i]
    out[#out + 1] = tonumber(ids[i + 1])
  end
end
return finish(out, had)
