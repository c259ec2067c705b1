-- The Rust rule this script mirrors: rules::queue::requeue (crates/core/src/rules/queue.rs).
-- Dedup Queue: dead letters ARGV[3..] of one shard made waiting again, due now, their delivery
-- counts dropped. Reply after the head (see queue_common.lua): per id its due time, or -1 when it
-- was no dead letter. Per chunk of at most 1000 ids: one ZMSCORE of X, then variadic writes; an id
-- repeated within a call is requeued once.
clock()
local out = {0, 0, 0}
local n = 3
for c = 3, #ARGV, 1000 do
  local last = math.min(c + 999, #ARGV)
  local xs = {}
  if had and counted then xs = redis.call('ZMSCORE', X, unpack(ARGV, c, last)) end
  local take, zs, t, seen = {}, {}, 0, {}
  for i = c, last do
    local id = ARGV[i]
    if xs[i - c + 1] and not seen[id] then
      seen[id] = true
      t = t + 1
      take[t] = id
      zs[2 * t - 1] = fmt(now); zs[2 * t] = id
      out[n + 1] = now
    else
      out[n + 1] = -1
    end
    n = n + 1
  end
  if t > 0 then
    redis.call('ZREM', X, unpack(take, 1, t))
    redis.call('HDEL', D, unpack(take, 1, t))
    redis.call('ZADD', W, unpack(zs, 1, 2 * t))
  end
end
return finish(out, had)
