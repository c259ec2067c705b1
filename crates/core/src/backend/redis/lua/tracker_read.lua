-- Item Tracker: read records. KEYS[1]: the group's records, KEYS[2]: its compact tree hash (the
-- buckets are named after it, see tracker_common.lua). ARGV[1]: the ids' hashes (id_hash.rs: 4
-- bytes each, in order); ARGV[2..]: ids.
-- Reply: now, then each record or false (a record whose expiry passed is dropped by the caller).
-- The bookkeeping (tracker_common.lua) is read with the first ids: an id not in the records hash
-- is looked for in its bucket when the group has a generation of compact keys.
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
local gen, bk, bs = 0, 0, 0
local miss, mids, mh = {}, {}, {}
for c = 2, #ARGV, 500 do
  local last = math.min(c + 499, #ARGV)
  local raws
  if c == 2 then
    raws = redis.call('HMGET', KEYS[1], '', unpack(ARGV, c, last))
    local m = table.remove(raws, 1)
    local g, k, s = string.match(m or '', '^%d+ %d+ %d+ (%d+) (%d+) (%d+) %d+ %d+ %d+ %d+$')
    if not g then
      -- Bookkeeping without them (absent, or of an earlier version): the tree hash has them.
      local v = redis.call('HMGET', KEYS[2], 'gen', 'k', 's')
      g, k, s = v[1], v[2], v[3]
    end
    gen, bk, bs = tonumber(g) or 0, tonumber(k) or 0, tonumber(s) or 0
  else
    raws = redis.call('HMGET', KEYS[1], unpack(ARGV, c, last))
  end
  for j = 1, #raws do
    out[#out + 1] = raws[j]
    if not raws[j] and gen > 0 then
      miss[#miss + 1] = #out
      mids[#mids + 1] = ARGV[c + j - 1]
      mh[#mh + 1] = (struct.unpack('<I4', ARGV[1], 4 * (c + j - 2) - 3))
    end
  end
end
if #miss > 0 then
  local crec = crec_lib()
  local st = crec.open(KEYS[2] .. ':b:' .. string.format('%d', gen) .. ':', false, {k = bk, s = bs, n = 0})
  local got = crec.mget(st, mids, mh)
  for q = 1, #miss do out[miss[q]] = got[q] end
end
return out
