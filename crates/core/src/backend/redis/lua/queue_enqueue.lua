-- Dedup Queue: enqueue ids of one shard. ARGV[3]: delay ms; ARGV[4]: '1' for debounce; ARGV[5..]:
-- ids. Reply after the head (see queue_common.lua): per id a code (1 added, 0 duplicate, 2
-- debounced, 3 claimed: kept to be delivered again after the claim ends) and its due time. No
-- slice of expired claims is returned to waiting here (the other steps do that): an id of this
-- call whose claim expired is returned alone, as the slice would, before it is judged. Per chunk
-- of at most 1000 ids: one ZMSCORE of waiting, one of claimed for the ids not waiting, one
-- variadic ZADD; an id may repeat within a call and is judged as by calls one after another.
-- The due time of ids this call makes waiting: the time is read only when one is.
local due
local function due_at()
  if not due then due = clock() + tonumber(ARGV[3]) end
  return due
end
local debounce = ARGV[4] == '1'
local out = {0, 0, 0}
-- Ids made waiting by this call: their due time.
local mine = {}
for c = 5, #ARGV, 1000 do
  local last = math.min(c + 999, #ARGV)
  local ws = redis.call('ZMSCORE', W, unpack(ARGV, c, last))
  -- Waiting and claimed ids are apart: a waiting id needs no other look.
  local cs = {}
  if had then
    local miss = {}
    for i = c, last do
      if not ws[i - c + 1] then miss[#miss + 1] = ARGV[i] end
    end
    if #miss > 0 then
      local got = redis.call('ZMSCORE', C, unpack(miss))
      for j = 1, #miss do cs[miss[j]] = got[j] end
    end
  end
  -- This chunk's writes to waiting, each id once with its last due time.
  local order, listed = {}, {}
  local function wait(id, at)
    mine[id] = at
    if not listed[id] then
      listed[id] = true
      order[#order + 1] = id
    end
  end
  for i = c, last do
    local id = ARGV[i]
    local code, at
    local w = mine[id] or ws[i - c + 1]
    local cl = not mine[id] and cs[id]
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
      wait(id, d)
      w, cl = d, false
    end
    if cl then
      local a = redis.call('ZSCORE', A, id)
      if a and not debounce then
        at = tonumber(a)
      else
        redis.call('ZADD', A, fmt(due_at()), id)
        at = due
      end
      code = 3
    elseif w and not debounce then
      code, at = 0, tonumber(w)
    else
      wait(id, due_at())
      if w then code = 2 else code = 1 end
      at = due
    end
    out[#out + 1] = code
    out[#out + 1] = at
  end
  if #order > 0 then
    local zs = {}
    for _, id in ipairs(order) do
      zs[#zs + 1] = fmt(mine[id])
      zs[#zs + 1] = id
    end
    redis.call('ZADD', W, unpack(zs))
  end
end
return finish(out, true)
