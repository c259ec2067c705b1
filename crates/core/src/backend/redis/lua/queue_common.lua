-- Dedup Queue: the shared head of every queue script (prepended to each; one shard per call).
-- KEYS[1]: waiting (zset, score: due ms); KEYS[2]: claimed (zset, score: visibility deadline);
-- KEYS[3]: owners of claims (hash id -> owner token); KEYS[4]: ids enqueued again while claimed
-- (zset, score: due ms); KEYS[5]: the queue's record (hash: n = the shard count the queue holds
-- ids for, k = how many of its shards hold any; absent while the queue is empty).
-- ARGV[1]: the caller's shard count. Every reply starts with 1, or is {0, the queue's shard
-- count} when the caller's differs and the queue holds ids (nothing changed then).
local W, C, O, A, M = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function fmt(n) return string.format('%d', n) end

local function held()
  return redis.call('ZCARD', W) + redis.call('ZCARD', C) + redis.call('ZCARD', A) > 0
end
local was_held = false

local function wrong_shards()
  local m = redis.call('HMGET', M, 'n', 'k')
  if m[1] and m[1] ~= ARGV[1] and tonumber(m[2] or '0') > 0 then return m[1] end
  was_held = held()
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

-- Counts this shard in or out of the queue's record; the record goes when no shard holds ids,
-- and the next write records its caller's shard count.
local function tidy()
  local now_held = held()
  if now_held == was_held then return end
  local delta = -1
  if now_held then delta = 1 end
  if redis.call('HINCRBY', M, 'k', delta) <= 0 then
    redis.call('DEL', M)
  else
    redis.call('HSET', M, 'n', ARGV[1])
  end
end

