-- The Rust rule this script mirrors: rules::queue::{settle, keeps_count} (crates/core/src/rules/queue.rs).
-- Dedup Queue: ack (ARGV[4] = 'a') or release (ARGV[4] = 'r', due again after ARGV[5] ms) ids of
-- one shard held by the owner token ARGV[3]. ARGV[6..]: ids. Expired claims are judged before they
-- are returned to waiting. Reply after the head (see queue_common.lua): per id a code (1 done, 2
-- done and the id waits again because it was enqueued while claimed, 0 not claimed, -1 another
-- owner, -2 expired) and the due time when the id is waiting again after this call, else -1.
-- Per chunk of at most 1000 ids: one ZMSCORE and HMGET to judge them, then variadic writes; an
-- id repeated within a call is settled once (then not claimed), as by calls one after another.
clock()
local owner, ack, delay = ARGV[3], ARGV[4] == 'a', tonumber(ARGV[5])
local out = {0, 0, 0}
local n = 3
-- Whether an id left the shard (acked, not enqueued again): only then may it hold none now.
local gone = false
local settled = {}
for c = 6, #ARGV, 1000 do
  local last = math.min(c + 999, #ARGV)
  local ds, os = {}, {}
  if had then
    ds = redis.call('ZMSCORE', C, unpack(ARGV, c, last))
    os = redis.call('HMGET', O, unpack(ARGV, c, last))
  end
  -- The ids settled now, and where their code is in the reply.
  local take, pos, t = {}, {}, 0
  for i = c, last do
    local id, k = ARGV[i], i - c + 1
    local code = 0
    if ds[k] and not settled[id] then
      if os[k] ~= owner then
        code = -1
      elseif tonumber(ds[k]) <= now then
        code = -2
      else
        code = 1
        settled[id] = true
        t = t + 1
        take[t] = id
        pos[t] = n + 1
      end
    end
    out[n + 1] = code
    out[n + 2] = -1
    n = n + 2
  end
  if t > 0 then
    redis.call('ZREM', C, unpack(take, 1, t))
    redis.call('HDEL', O, unpack(take, 1, t))
    -- An ack drops the delivery counts (on a shard whose mark says it may hold some).
    if ack and counted then redis.call('HDEL', D, unpack(take, 1, t)) end
    local as = redis.call('ZMSCORE', A, unpack(take, 1, t))
    local again, zs = {}, {}
    for j = 1, t do
      local id, a, p = take[j], as[j], pos[j]
      local at = -1
      if a then
        again[#again + 1] = id
        out[p] = 2
      end
      if ack then
        if a then at = tonumber(a) else gone = true end
      else
        at = now + delay
        if a and tonumber(a) > at then at = tonumber(a) end
      end
      if at >= 0 then
        zs[#zs + 1] = fmt(at); zs[#zs + 1] = id
      end
      out[p + 1] = at
    end
    if #again > 0 then redis.call('ZREM', A, unpack(again)) end
    if #zs > 0 then redis.call('ZADD', W, unpack(zs)) end
  end
end
reap(#ARGV - 5)
local holds = had
if gone then
  if counted then holds = redis.call('EXISTS', W, C, A, X) > 0 else holds = redis.call('EXISTS', W, C, A) > 0 end
end
return finish(out, holds)
