-- The Rust rules this head mirrors: rules::queue::{live, back_at} (crates/core/src/rules/queue.rs), in `reap`.
-- Dedup Queue: the shared head of every queue script (prepended to each; one shard per call, so
-- every key of a call is in the shard's hash slot).
-- KEYS[1]: waiting (zset, score: due ms); KEYS[2]: claimed (zset, score: visibility deadline);
-- KEYS[3]: owners of claims (hash id -> owner token); KEYS[4]: ids enqueued again while claimed
-- (zset, score: due ms); KEYS[5]: the shard's mark, the queue's shard count, present exactly while
-- the shard holds ids (then the queue's record, queue_meta.lua, counts the shard and holds the
-- same count, so the count cannot change). KEYS[6], given to every step but an enqueue without a
-- capped debounce: first-enqueue times (hash id -> ms) of pending enqueues (waiting, or enqueued
-- again while claimed), only for ids a capped debounce touched (rules::queue::capped); a claim
-- drops them. The mark ends in 'f' once a capped debounce recorded one (until the shard holds no
-- id), so a claim on a shard that never had one sends no command for them.
-- Dead letters (rules::queue::{deliver, keeps_count, requeue}): `D`, delivery counts (hash id ->
-- count) of ids a read with maxDeliveries claimed, and `X`, the dead letters (zset, score: the
-- time each died; its count stays in D), named after the mark's key (`:d`, `:x`, the shard's hash
-- slot) and not passed: a step that never uses them sends no byte more. The mark ends in 'd' once
-- a counting read wrote one (until the shard holds no id), and only then does an ack drop counts,
-- an enqueue look for dead letters and a size count them. A shard holding only dead letters holds
-- ids (its mark and the record's count stay).
-- ARGV[1]: the caller's shard count. ARGV[2]: how the caller stands with the record: '' nothing
-- asked (a step that adds no id), 'e' nothing asked (an enqueue), 'r' a place reserved for this
-- enqueue, 'c' the count checked.
-- Every reply starts with a status, the change of the record's shard count to report, and the
-- server's time (ms): status 1 done; 3 done on a shard that holds no id and has no mark (the
-- caller checks the count on the record before answering); 2 nothing done, the record is needed
-- first (an enqueue onto a shard without mark, or a shard holding ids without mark, written before
-- marks existed); 0 refused: {0, the queue's shard count}.
local W, C, O, A, M, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local D, X = string.sub(M, 1, -2) .. 'd', string.sub(M, 1, -2) .. 'x'
local mark = redis.call('GET', M)
-- Whether the shard may hold delivery counts or dead letters (its mark ends in 'd').
local counted = false
if mark and string.byte(mark, -1) == 100 then
  counted = true
  mark = string.sub(mark, 1, -2)
end
-- Whether the shard may hold first-enqueue times (its mark ends in 'f', before any 'd').
local flagged = false
if mark and string.byte(mark, -1) == 102 then
  flagged = true
  mark = string.sub(mark, 1, -2)
end
if mark and mark ~= ARGV[1] then return {0, tonumber(mark)} end
-- The server's time (ms), read by `clock()` at the first need: every step but the enqueue reads it
-- first; an enqueue that only finds its ids waiting never reads it (and replies 0 for it).
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local mode = ARGV[2]
local status = 1
-- Whether the shard held ids before this step.
local had = mark ~= false
-- The mark's value for the flags now.
local function mark_of()
  return ARGV[1] .. (flagged and 'f' or '') .. (counted and 'd' or '')
end
if not had then
  local held = redis.call('EXISTS', W, C, A) > 0
  if mode == 'e' or (mode == '' and held) then return {2, 0, clock()} end
  if mode == '' then status = 3 end
  if held then
    -- Written before marks existed: the record counts the shard already (mode 'c' or 'r').
    flagged = F ~= nil and redis.call('EXISTS', F) > 0
    redis.call('SET', M, mark_of())
    had = true
  end
end

local function fmt(n) return string.format('%d', n) end

-- A capped debounce recorded a first-enqueue time: the mark says so (a shard without mark yet
-- gets it from `finish`).
local function flag_first()
  if flagged then return end
  flagged = true
  if had then redis.call('SET', M, mark_of()) end
end

-- A counting read wrote a delivery count: the mark says so (the shard holds ids then).
local function flag_count()
  if counted then return end
  counted = true
  if had then redis.call('SET', M, mark_of()) end
end

-- Expired claims go back to waiting, due at their deadline, or at the due time of an enqueue
-- made while they were claimed when that is later. At most `max` per call (at least SLICE):
-- when many claims expire at once, the following calls return them slice by slice, so no call
-- stalls Redis. A claim whose deadline passed counts as waiting and due (queue_size.lua) and
-- cannot be acked or released (queue_settle.lua) before it is returned.
local SLICE = 1000
local function reap(max)
  if not had then return end
  local left = math.max(SLICE, max)
  -- Variadic commands per chunk of at most 1000 ids (the most Lua's unpack takes safely).
  local again
  while left > 0 do
    local exp = redis.call('ZRANGEBYSCORE', C, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, math.min(1000, left))
    if #exp == 0 then break end
    if again == nil then again = redis.call('EXISTS', A) > 0 end
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

-- Ends the step: `holds`, whether the shard holds ids now, sets or removes the mark, and `out`
-- gets the reply's head: the status, the change of the record's count (the shard's change
-- between holding no id and holding some, less the place reserved for this enqueue) and now (0
-- when the step did not read the time).
local function finish(out, holds)
  if holds and not had then redis.call('SET', M, mark_of()) end
  if had and not holds then redis.call('DEL', M) end
  local change = 0
  if holds then change = change + 1 end
  if had then change = change - 1 end
  if mode == 'r' then change = change - 1 end
  out[1], out[2], out[3] = status, change, now or 0
  return out
end
