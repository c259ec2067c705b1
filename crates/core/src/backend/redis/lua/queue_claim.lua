-- The Rust rule this script mirrors: rules::queue::{deliverable, lease, deliver} (crates/core/src/rules/queue.rs).
-- Dedup Queue: claim up to ARGV[4] due ids of one shard, oldest first, for ARGV[5] ms, for the
-- owner token ARGV[3], unless the server's time is past ARGV[6] (ms, Redis's clock): the latest
-- start at which the caller still waits for the reply (see queue.rs). Reply after the head (see
-- queue_common.lua): the visibility deadline, then id and due time per claimed id; -1 alone when
-- too late (nothing claimed). Per chunk of at most 1000 ids: one variadic ZREM, ZADD and HSET, and
-- on a shard whose mark says it may hold first-enqueue times (KEYS[6]) one HDEL of theirs: a read
-- starts a new count of a capped debounce. ARGV[7], only for a read with maxDeliveries: the
-- most deliveries; then each due id's count is read (HMGET of D on a shard whose mark says it may
-- hold some) and written (HSET), and an id delivered that many times goes to the dead letters X
-- (ZADD, scored now) instead, at most ARGV[4] of them per call; rounds go on until the batch is
-- full, the shard has no due id, or that bound is reached.
clock()
if now > tonumber(ARGV[6]) then return finish({0, 0, 0, -1}, had) end
reap(tonumber(ARGV[4]))
local deadline = now + tonumber(ARGV[5])
local out = {0, 0, 0, deadline}
-- A member longer than any id (ids are at most 1024 bytes) that a claim of many ids writes first
-- and removes at once: Redis (and Valkey) keep a small sorted set or hash as a listpack, where each
-- insert and lookup walks the whole key (a claim of 100 ids and its ack were quadratic, ~10 µs of
-- Redis time per id); a member longer than 64 bytes makes the key a skiplist / hash table for good.
local WIDE = 24
local max = ARGV[7] and tonumber(ARGV[7])
if had and max then
  local limit, d = tonumber(ARGV[4]), fmt(deadline)
  local n, got, died = 4, 0, 0
  while got < limit and died < limit do
    local ask = math.min(limit - got, limit - died)
    local ids = redis.call('ZRANGEBYSCORE', W, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, ask)
    for c = 1, #ids, 2000 do
      local take, t = {}, 0
      for i = c, math.min(c + 1999, #ids), 2 do
        t = t + 1
        take[t] = ids[i]
      end
      local counts = counted and redis.call('HMGET', D, unpack(take, 1, t)) or {}
      local zs, hs, ds, xs, z, x = {}, {}, {}, {}, 0, 0
      for j = 1, t do
        local id, k = take[j], tonumber(counts[j] or '0')
        if k >= max then
          xs[x + 1] = fmt(now); xs[x + 2] = id
          x = x + 2
          died = died + 1
        else
          zs[z + 1] = d; zs[z + 2] = id
          hs[z + 1] = id; hs[z + 2] = ARGV[3]
          ds[z + 1] = id; ds[z + 2] = fmt(k + 1)
          z = z + 2
          out[n + 1] = id
          out[n + 2] = tonumber(ids[c + 2 * j - 1])
          n = n + 2
          got = got + 1
        end
      end
      redis.call('ZREM', W, unpack(take, 1, t))
      if flagged then redis.call('HDEL', F, unpack(take, 1, t)) end
      if z > 0 then
        redis.call('ZADD', C, unpack(zs, 1, z))
        redis.call('HSET', O, unpack(hs, 1, z))
        redis.call('HSET', D, unpack(ds, 1, z))
        flag_count()
      end
      if x > 0 then redis.call('ZADD', X, unpack(xs, 1, x)) end
    end
    if #ids < 2 * ask then break end
  end
elseif had then
  local ids = redis.call('ZRANGEBYSCORE', W, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, ARGV[4])
  local d = fmt(deadline)
  local wide = #ids >= 2 * WIDE and string.rep('~', 1025)
  local n = 4
  for c = 1, #ids, 2000 do
    local take, zs, hs, t, z = {}, {}, {}, 0, 0
    if wide and c == 1 then
      zs[1] = d; zs[2] = wide
      hs[1] = wide; hs[2] = ''
      z = 2
    end
    for i = c, math.min(c + 1999, #ids), 2 do
      local id = ids[i]
      t = t + 1
      take[t] = id
      zs[z + 1] = d; zs[z + 2] = id
      hs[z + 1] = id; hs[z + 2] = ARGV[3]
      z = z + 2
      out[n + 1] = id
      out[n + 2] = tonumber(ids[i + 1])
      n = n + 2
    end
    redis.call('ZREM', W, unpack(take, 1, t))
    if flagged then redis.call('HDEL', F, unpack(take, 1, t)) end
    redis.call('ZADD', C, unpack(zs, 1, z))
    redis.call('HSET', O, unpack(hs, 1, z))
  end
  if wide then
    redis.call('ZREM', C, wide)
    redis.call('HDEL', O, wide)
  end
end
return finish(out, had)
