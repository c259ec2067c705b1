-- Dedup Queue: the first ARGV[2] waiting ids of one shard by due time, without claiming.
-- Reply: the change of the shard's state (see tidy), now, then id and due time per id.
reap(tonumber(ARGV[2]))
local ids = redis.call('ZRANGE', W, 0, fmt(tonumber(ARGV[2]) - 1), 'WITHSCORES')
local out = {1, now}
for i = 1, #ids, 2 do
  out[#out + 1] = ids[i]
  out[#out + 1] = tonumber(ids[i + 1])
end
out[1] = tidy()
return out
