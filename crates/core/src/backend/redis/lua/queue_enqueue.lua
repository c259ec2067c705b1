-- Dedup Queue: enqueue ids of one shard. ARGV[3]: delay ms; ARGV[4]: '1' for debounce; ARGV[5..]:
-- ids. Reply after the head (see queue_common.lua): per id a code (1 added, 0 duplicate, 2
-- debounced, 3 claimed: kept to be delivered again after the claim ends) and its due time. No
-- slice of expired claims is returned to waiting here (the other steps do that): an id of this
-- call whose claim expired is returned alone, as the slice would, before it is judged.
local due = now + tonumber(ARGV[3])
local debounce = ARGV[4] == '1'
local out = {0, 0, 0}
for i = 5, #ARGV do
  local id = ARGV[i]
  local code, at
  -- Waiting and claimed ids are apart: a duplicate costs one look.
  local w = redis.call('ZSCORE', W, id)
  local c = not w and had and redis.call('ZSCORE', C, id)
  if c and tonumber(c) <= now then
    -- An expired claim: back to waiting, due at its deadline or its later enqueue again.
    local d = tonumber(c)
    local a = redis.call('ZSCORE', A, id)
    if a then
      redis.call('ZREM', A, id)
      if tonumber(a) > d then d = tonumber(a) end
    end
    redis.call('ZREM', C, id)
    redis.call('HDEL', O, id)
    redis.call('ZADD', W, fmt(d), id)
    w, c = d, false
  end
  if c then
    local a = redis.call('ZSCORE', A, id)
    if a and not debounce then
      at = tonumber(a)
    else
      redis.call('ZADD', A, fmt(due), id)
      at = due
    end
    code = 3
  elseif w and not debounce then
    code, at = 0, tonumber(w)
  else
    redis.call('ZADD', W, fmt(due), id)
    if w then code = 2 else code = 1 end
    at = due
  end
  out[#out + 1] = code
  out[#out + 1] = at
end
return finish(out, true)
