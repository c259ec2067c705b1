-- Item Tracker: one page of a group, with counts per status.
-- KEYS: the group (see tracker_common.lua).
-- ARGV: filter (all | in_progress | abandoned | completed | failed), offset, limit, retention ms.
-- Reply: now, live, abandoned, completed, failed, then id and record pairs.
local filter = ARGV[1]
local offset, limit, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- Forget every record whose time has passed, so the counts are exact.
purge(retention, -1)

-- '%d', not concatenation: Lua turns a number into text with '%.14g'.
local after_now = '(' .. string.format('%d', now)

local live = redis.call('ZCOUNT', KEYS[1], after_now, '+inf')
local abandoned = redis.call('ZCOUNT', KEYS[1], '-inf', now)
local completed = redis.call('ZCARD', KEYS[2])
local failed = redis.call('ZCARD', KEYS[3])

local segments = {
  {name = 'in_progress', count = live, fetch = function(o, c)
    return redis.call('ZRANGEBYSCORE', KEYS[1], after_now, '+inf', 'LIMIT', o, c) end},
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
        local raw = redis.call('HGET', KEYS[4], id)
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
