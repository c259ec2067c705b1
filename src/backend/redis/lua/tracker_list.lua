-- Item Tracker: one page of a group, with counts per status.
-- KEYS[1..3]: the group's in_progress, completed and failed indexes (all in the group's slot).
-- ARGV: record key head (the group's key + ':i:'), filter (all | in_progress | abandoned |
--       completed | failed), offset, limit, retention ms.
-- Reply: now, live, abandoned, completed, failed, then id and record pairs.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head, filter = ARGV[1], ARGV[2]
local offset, limit, retention = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

-- Forget index entries whose records have expired.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - retention)

local live = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local abandoned = redis.call('ZCOUNT', KEYS[1], '-inf', now)
local completed = redis.call('ZCARD', KEYS[2])
local failed = redis.call('ZCARD', KEYS[3])

local segments = {
  {name = 'in_progress', count = live, fetch = function(o, c)
    return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', o, c) end},
  {name = 'abandoned', count = abandoned, fetch = function(o, c)
    return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', o, c) end},
  {name = 'failed', count = failed, fetch = function(o, c)
    return redis.call('ZRANGE', KEYS[3], o, o + c - 1) end},
  {name = 'completed', count = completed, fetch = function(o, c)
    return redis.call('ZRANGE', KEYS[2], o, o + c - 1) end},
}

local out = {now, live, abandoned, completed, failed}
local skip, want = offset, limit
for _, seg in ipairs(segments) do
  if want <= 0 then break end
  if filter == 'all' or filter == seg.name then
    if skip >= seg.count then
      skip = skip - seg.count
    else
      local ids = seg.fetch(skip, math.min(want, seg.count - skip))
      skip = 0
      for _, id in ipairs(ids) do
        want = want - 1
        local raw = redis.call('GET', head .. id)
        if raw then
          out[#out + 1] = id; out[#out + 1] = raw
        else
          for k = 1, 3 do redis.call('ZREM', KEYS[k], id) end
        end
      end
    end
  end
end
return out
