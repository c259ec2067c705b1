-- Dedup Queue: enqueue ids of one shard. ARGV[2]: delay ms; ARGV[3]: '1' for debounce; ARGV[4..]:
-- ids. Reply: the change of the shard's state (see tidy), then per id a code (1 added, 0
-- duplicate, 2 debounced, 3 claimed: kept to be delivered again after the claim ends) and its due
-- time.
reap(#ARGV - 3)
local due = now + tonumber(ARGV[2])
local debounce = ARGV[3] == '1'
local out = {1}
for i = 4, #ARGV do
  local id = ARGV[i]
  local code, at
  if redis.call('ZSCORE', C, id) then
    local a = redis.call('ZSCORE', A, id)
    if a and not debounce then
      at = tonumber(a)
    else
      redis.call('ZADD', A, fmt(due), id)
      at = due
    end
    code = 3
  else
    local w = redis.call('ZSCORE', W, id)
    if w and not debounce then
      code, at = 0, tonumber(w)
    else
      redis.call('ZADD', W, fmt(due), id)
      if w then code = 2 else code = 1 end
      at = due
    end
  end
  out[#out + 1] = code
  out[#out + 1] = at
end
out[1] = tidy()
return out
