-- Dedup Queue: the shared head of every queue script (prepended to each; one shard per call, so
-- every key of a call is in the shard's hash slot).
-- KEYS[1]: waiting (zset, score: due ms); KEYS[2]: claimed (zset, score: visibility deadline);
-- KEYS[3]: owners of claims (hash id -> owner token); KEYS[4]: ids enqueued again while claimed
-- (zset, score: due ms). ARGV[1]: the caller's shard count, checked against the queue's record
-- by queue_meta.lua before the step. Every reply starts with the change of the shard's state
-- (tidy), which the caller reports to the queue's record.
local W, C, O, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function fmt(n) return string.format('%d', n) end

local function held()
  return redis.call('ZCARD', W) + redis.call('ZCARD', C) + redis.call('ZCARD', A) > 0
end
local was_held = held()

-- Expired claims go back to waiting, due at their deadline, or at the due time of an enqueue
-- made while they were claimed when that is later. At most `max` per call (at least SLICE):
-- when many claims expire at once, the following calls return them slice by slice, so no call
-- stalls Redis. A claim whose deadline passed counts as waiting and due (queue_size.lua) and
-- cannot be acked or released (queue_settle.lua) before it is returned.
local SLICE = 1000
local function reap(max)
  local left = math.max(SLICE, max)
  -- Variadic commands per chunk of at most 1000 ids (the most Lua's unpack takes safely).
  local again = redis.call('ZCARD', A) > 0
  while left > 0 do
    local exp = redis.call('ZRANGEBYSCORE', C, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, math.min(1000, left))
    if #exp == 0 then break end
    local ids, zs = {}, {}
    for i = 1, #exp, 2 do
      local id, due = exp[i], tonumber(exp[i + 1])
      if again then
        local a = redis.call('ZSCORE', A, id)
        if a and tonumber(a) > due then due = tonumber(a) end
      end
      ids[#ids + 1] = id
      zs[#zs + 1] = fmt(due); zs[#zs + 1] = id
    end
    redis.call('ZREM', C, unpack(ids))
    redis.call('HDEL', O, unpack(ids))
    if again then redis.call('ZREM', A, unpack(ids)) end
    redis.call('ZADD', W, unpack(zs))
    left = left - #ids
    if #ids < 1000 then break end
  end
end

-- 1: the shard held no id before this step and holds some now; -1: the other way round; else 0.
local function tidy()
  local now_held = held()
  if now_held == was_held then return 0 end
  if now_held then return 1 end
  return -1
end
