-- Dedup Queue: the shared head of every queue script (prepended to each; one shard per call).
-- KEYS[1]: waiting (zset, score: due ms); KEYS[2]: claimed (zset, score: visibility deadline);
-- KEYS[3]: owners of claims (hash id -> owner token); KEYS[4]: ids enqueued again while claimed
-- (zset, score: due ms); KEYS[5]: the shard count the shard was written with.
-- ARGV[1]: the caller's shard count. Every reply starts with 1, or is {0, stored shard count}
-- when the caller's shard count differs from the one the shard holds ids for.
local W, C, O, A, M = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function fmt(n) return string.format('%d', n) end

local function wrong_shards()
  local m = redis.call('GET', M)
  if m and m ~= ARGV[1] then return m end
  return false
end

-- Expired claims go back to waiting, due at their deadline, or at the due time of an enqueue
-- made while they were claimed when that is later.
local function reap()
  local exp = redis.call('ZRANGEBYSCORE', C, '-inf', fmt(now), 'WITHSCORES')
  for i = 1, #exp, 2 do
    local id, due = exp[i], tonumber(exp[i + 1])
    redis.call('ZREM', C, id)
    redis.call('HDEL', O, id)
    local a = redis.call('ZSCORE', A, id)
    if a then
      redis.call('ZREM', A, id)
      if tonumber(a) > due then due = tonumber(a) end
    end
    redis.call('ZADD', W, fmt(due), id)
  end
end

-- The shard count is remembered while the shard holds anything, and forgotten when it is empty.
local function tidy()
  if redis.call('ZCARD', W) + redis.call('ZCARD', C) + redis.call('ZCARD', A) == 0 then
    redis.call('DEL', M)
  else
    redis.call('SET', M, ARGV[1])
  end
end

