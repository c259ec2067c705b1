-- Dedup Queue: the server's time in ms (KEYS[1]: a key of the shard, so a cluster runs it on the
-- shard's node). Read once by a store before its first claim (see queue.rs).
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
