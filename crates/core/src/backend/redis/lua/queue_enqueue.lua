-- The Rust rules this script mirrors: rules::queue::{enqueue, capped} (crates/core/src/rules/queue.rs).
-- Dedup Queue: enqueue ids of one shard. ARGV[3]: delay ms; ARGV[4]: '' no debounce, '1' debounce,
-- 'm' followed by the cap in ms for a debounce capped after the first enqueue (then KEYS[6] is
-- given: the first-enqueue times, one HMGET and at most one HSET per chunk); ARGV[5..]: ids.
-- Reply after the head (see queue_common.lua): per id a code (1 added, 0 duplicate, 2 debounced,
-- 3 claimed: kept to be delivered again after the claim ends, 4 dead: a dead letter, left one, due
-- time 0) and its due time; when every id was added (code 1) at one due time, that time alone
-- (a batch of new ids: one value, not two per id). On a shard whose mark says it may hold dead
-- letters, one ZMSCORE of them per chunk for the ids neither waiting nor claimed. No slice of
-- expired claims is returned to waiting here (the other steps do that): an id of this call whose
-- claim expired is returned alone, as the slice would, before it is judged. Per chunk
-- of at most 1000 ids: one ZMSCORE of waiting, one of claimed for the ids not waiting, one
-- variadic ZADD; an id may repeat within a call and is judged as by calls one after another.
-- The due time of ids this call makes waiting, and its text: the time is read only when one is.
local delay = tonumber(ARGV[3])
local due, due_s
local debounce = ARGV[4] ~= ''
local cap = debounce and ARGV[4] ~= '1' and tonumber(string.sub(ARGV[4], 2))
-- With a cap: the first-enqueue time of ids of this call.
local firsts = {}
local out = {0, 0, 0}
local n = 3
-- Ids made waiting by this call: their due time.
local mine = {}
-- Whether every id so far was added (code 1) at `due`: then the reply after the head is `due` alone.
local all = true
for c = 5, #ARGV, 1000 do
  local last = math.min(c + 999, #ARGV)
  local ws = redis.call('ZMSCORE', W, unpack(ARGV, c, last))
  local fs, hs = cap and redis.call('HMGET', F, unpack(ARGV, c, last)), {}
  -- Waiting and claimed ids are apart: a waiting id needs no other look. `cs`: the claimed ones.
  local cs, xs
  if had then
    local miss, m = {}, 0
    for i = c, last do
      if not ws[i - c + 1] then
        m = m + 1
        miss[m] = ARGV[i]
      end
    end
    if m > 0 then
      local got = redis.call('ZMSCORE', C, unpack(miss, 1, m))
      -- `rest`, the ids neither waiting nor claimed, only where dead letters may be.
      local rest, r = counted and {}, 0
      for j = 1, m do
        if got[j] then
          cs = cs or {}
          cs[miss[j]] = got[j]
        elseif counted then
          r = r + 1
          rest[r] = miss[j]
        end
      end
      if counted and r > 0 then
        local dead = redis.call('ZMSCORE', X, unpack(rest, 1, r))
        for j = 1, r do
          if dead[j] then
            xs = xs or {}
            xs[rest[j]] = true
          end
        end
      end
    end
  end
  -- This chunk's writes to waiting: an id made waiting twice is written twice, the last wins.
  local zs, z = {}, 0
  for i = c, last do
    local id = ARGV[i]
    local code, at
    local mi = mine[id]
    local w = mi or ws[i - c + 1]
    local cl = cs and not mi and cs[id]
    if xs and xs[id] then
      -- A dead letter stays one (rules::queue::enqueue, Place::Dead).
      code, at = 4, 0
    else
      if cl and tonumber(cl) <= clock() then
        -- An expired claim: back to waiting, due at its deadline or its later enqueue again.
        local d = tonumber(cl)
        local a = redis.call('ZSCORE', A, id)
        if a then
          redis.call('ZREM', A, id)
          if tonumber(a) > d then d = tonumber(a) end
        end
        redis.call('ZREM', C, id)
        redis.call('HDEL', O, id)
        cs[id] = nil
        mine[id] = d
        zs[z + 1] = fmt(d); zs[z + 2] = id
        z = z + 2
        w, cl = d, false
      end
      if not due and (cl or not w or debounce) then
        due = clock() + delay
        due_s = fmt(due)
      end
      -- This id's due time: a capped debounce counts from the first enqueue (recorded now if none).
      local d, d_s = due, due_s
      if cap then
        local f = firsts[id] or fs[i - c + 1]
        if f then
          f = tonumber(f)
        else
          f = clock()
          hs[#hs + 1] = id; hs[#hs + 1] = fmt(f)
        end
        firsts[id] = f
        if f + cap < due then d = f + cap; d_s = fmt(d) end
      end
      if cl then
        local a = redis.call('ZSCORE', A, id)
        if a and not debounce then
          at = tonumber(a)
        else
          redis.call('ZADD', A, d_s, id)
          at = d
        end
        code = 3
      elseif w and not debounce then
        code, at = 0, tonumber(w)
      else
        mine[id] = d
        zs[z + 1] = d_s; zs[z + 2] = id
        z = z + 2
        if w then code = 2 else code = 1 end
        at = d
      end
    end
    if all and (code ~= 1 or at ~= due) then
      -- The first other outcome: the ids before it were all added at `due`.
      all = false
      for j = 4, n, 2 do out[j] = 1; out[j + 1] = due end
    end
    if not all then
      out[n + 1] = code
      out[n + 2] = at
    end
    n = n + 2
  end
  if z > 0 then redis.call('ZADD', W, unpack(zs, 1, z)) end
  if #hs > 0 then
    redis.call('HSET', F, unpack(hs))
    flag_first()
  end
end
-- Every id added at one due time (a batch of new ids): that time alone after the head.
if all and due then return finish({0, 0, 0, due}, true) end
return finish(out, true)
