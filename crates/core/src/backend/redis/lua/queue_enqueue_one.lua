-- The Rust rules this script mirrors: rules::queue::{enqueue, capped} (crates/core/src/rules/queue.rs).
-- Dedup Queue: enqueue of one id onto a shard that holds ids (its mark set), the webhook's step,
-- in the fewest commands: the decisions of queue_enqueue.lua for one id, written out for it (no
-- shared head, no chunks, no tables). Same keys and arguments as queue_enqueue.lua in mode 'e'
-- (KEYS: waiting, claimed, owners, enqueued again while claimed, the shard's mark, and for a capped
-- debounce the first-enqueue times; ARGV: the caller's shard count, 'e', delay ms, '' / '1' /
-- 'm' and the cap in ms for the debounce, the id) and the same reply: {status,
-- change, now, code, due}; {2, 0, 0} when the shard has no mark (nothing done: the caller
-- reserves a place on the queue's record and sends queue_enqueue.lua), {0, count} when the
-- shard's count is another. A duplicate (waiting, no debounce) costs GET and ZSCORE, and
-- replies 0 for the time it did not read. The model test holds it equal to queue_enqueue.lua.
local W, C, O, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mark = redis.call('GET', KEYS[5])
-- A mark ending in 'd': the shard may hold dead letters (KEYS[5]'s name with 'x' for 'n');
-- before it, 'f': it may hold first-enqueue times (see queue_common.lua).
local counted = mark and string.byte(mark, -1) == 100
if counted then mark = string.sub(mark, 1, -2) end
if mark ~= ARGV[1] and mark ~= ARGV[1] .. 'f' then
  if mark then return {0, tonumber((string.gsub(mark, 'f$', '')))} end
  return {2, 0, 0}
end
local id, debounce = ARGV[5], ARGV[4] ~= ''
local w = redis.call('ZSCORE', W, id)
if w and not debounce then return {1, 0, 0, 0, tonumber(w)} end
-- A dead letter stays one (rules::queue::enqueue, Place::Dead): code 4, due time 0.
if not w and counted and redis.call('ZSCORE', string.sub(KEYS[5], 1, -2) .. 'x', id) and
  not redis.call('ZSCORE', C, id) then
  return {1, 0, 0, 4, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = now + tonumber(ARGV[3])
if debounce and ARGV[4] ~= '1' then
  -- A capped debounce: never past the first enqueue (recorded now if none) + the cap.
  local f = redis.call('HGET', KEYS[6], id)
  if f then
    f = tonumber(f)
  else
    f = now
    redis.call('HSET', KEYS[6], id, string.format('%d', now))
    if mark == ARGV[1] then redis.call('SET', KEYS[5], ARGV[1] .. 'f' .. (counted and 'd' or '')) end
  end
  local cap = f + tonumber(string.sub(ARGV[4], 2))
  if cap < due then due = cap end
end
if not w then
  local cl = redis.call('ZSCORE', C, id)
  if cl then
    cl = tonumber(cl)
    local a = redis.call('ZSCORE', A, id)
    if cl > now then
      -- Claimed: kept to be delivered again after the claim ends (a debounce moves that time).
      if a and not debounce then return {1, 0, now, 3, tonumber(a)} end
      redis.call('ZADD', A, string.format('%d', due), id)
      return {1, 0, now, 3, due}
    end
    -- An expired claim: back to waiting, due at its deadline or its later enqueue again.
    if a then
      redis.call('ZREM', A, id)
      if tonumber(a) > cl then cl = tonumber(a) end
    end
    redis.call('ZREM', C, id)
    redis.call('HDEL', O, id)
    if not debounce then
      redis.call('ZADD', W, string.format('%d', cl), id)
      return {1, 0, now, 0, cl}
    end
    w = cl
  end
end
redis.call('ZADD', W, string.format('%d', due), id)
if w then return {1, 0, now, 2, due} end
return {1, 0, now, 1, due}
