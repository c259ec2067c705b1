-- Item Tracker: one page of a group, with counts per status.
-- KEYS: the group (see tracker_common.lua).
-- ARGV: filter (all | in_progress | abandoned | completed | failed | dead), offset, limit,
-- retention ms.
-- Reply: now, live, abandoned, completed, failed, dead, then id and record pairs.
-- Bounded work: one purge slice, counts by score range and pages by rank (O(log n + page)).
local filter = ARGV[1]
local offset, limit, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- The bookkeeping: whether the group has compact keys (see compact, tracker_common.lua).
read_meta(redis.call('HGET', KEYS[4], META))
local exact = upkeep().purge_slice(retention, SLICE, true)

-- '%d', not concatenation: Lua turns a number into text with '%.14g'.
local now_s = string.format('%d', now)
local after_now = '(' .. now_s

-- Completed and failed are scored by expiry: the live ones are those after now, whatever the
-- purge left. In progress is scored by lease end; a lease that ended is abandoned while its
-- record lives. When the purge slice did not reach every ended lease, the records that may have
-- expired are those that ended this client's retention ago: they are left out of the count (and
-- forgotten by the next calls).
local ended = redis.call('ZCOUNT', KEYS[1], '-inf', now_s)
local live = redis.call('ZCOUNT', KEYS[1], after_now, BELOW_END)
local abandoned = ended
if not exact then
  abandoned = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', now - retention), now_s)
end
local completed = redis.call('ZCOUNT', KEYS[2], after_now, BELOW_END)
-- The compact index's live entries, then KEYS[2]'s: the staged completions (see STAGE), which
-- sort after every compact entry (and the completed ids of a group written by 0.1.0).
local c, b = compact(false)
local c_first, c_live = 0, 0
if c then
  c_first = cidx_lib().expired(c, now)
  c_live = cidx_lib().count(c) - c_first
end
local legacy = completed
completed = completed + c_live
local failed = redis.call('ZCOUNT', KEYS[3], after_now, BELOW_END)
local dead = redis.call('ZCOUNT', KEYS[5], after_now, BELOW_END)

-- Each segment is a rank range of its index: [first, first + count), below the end mark (see
-- END) when the index has one.
local segments = {
  {name = 'in_progress', key = KEYS[1], first = ended, count = live},
  {name = 'abandoned', key = KEYS[1], first = ended - abandoned, count = abandoned},
  {name = 'failed', key = KEYS[3], first = redis.call('ZCOUNT', KEYS[3], '-inf', BELOW_END) - failed, count = failed},
  {name = 'dead', key = KEYS[5], first = redis.call('ZCOUNT', KEYS[5], '-inf', BELOW_END) - dead, count = dead},
  {name = 'completed', compact = true, first = c_first, count = c_live},
  {name = 'completed', key = KEYS[2], first = redis.call('ZCOUNT', KEYS[2], '-inf', BELOW_END) - legacy, count = legacy},
}

local out = {now, live, abandoned, completed, failed, dead}
local skip, want = offset, limit
for _, seg in ipairs(segments) do
  if want <= 0 then break end
  if filter == 'all' or filter == seg.name then
    if skip >= seg.count then
      skip = skip - seg.count
    else
      local from = seg.first + skip
      local take = math.min(want, seg.count - skip)
      skip = 0
      if seg.compact then
        local C, R = cidx_lib(), crec_lib()
        local got = C.range(c, from, take)
        for q = 1, #got, 2 do
          local id = got[q]
          want = want - 1
          local raw = redis.call('HGET', KEYS[4], id) or R.get(b, id, R.fnv1a(id))
          if raw then
            out[#out + 1] = id; out[#out + 1] = raw
          else
            C.remove(c, got[q + 1], id)
          end
        end
      else
        local ids = redis.call('ZRANGE', seg.key, from, from + take - 1)
        for _, id in ipairs(ids) do
          want = want - 1
          local raw = redis.call('HGET', KEYS[4], id)
          if raw then
            out[#out + 1] = id; out[#out + 1] = raw
          else
            for _, k in ipairs({1, 2, 3, 5}) do redis.call('ZREM', KEYS[k], id) end
          end
        end
      end
    end
  end
end
compact_save()
save(nil)
return out
