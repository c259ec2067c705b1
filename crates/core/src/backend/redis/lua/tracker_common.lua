-- Item Tracker, shared by its scripts (prepended to each).
-- A group is KEYS[1..3], its in_progress (score: lease end), completed and failed (score: when
-- the record expires) indexes, and KEYS[4], its records: a hash of id -> record JSON. A record
-- whose expiry (`x`) has passed counts as absent; `purge` deletes such records, and each key of
-- a group lives as long as its longest-lived record (`keep_alive`), so a group nobody touches
-- again disappears by itself.
-- Numbers become text only as redis.call arguments (Redis writes integers exactly), through
-- string.format('%d', …), or inside records through cjson, which writes 14 significant digits:
-- exact for every time in ms before the year 5138 and every count. Never by concatenation, which
-- uses '%.14g' ('1e+14').
-- The expiry of a record kept forever (tracker.rs NEVER): exact in cjson, reached by no clock.
local NEVER = 99999999999999
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A record, or false when there is none or it expired; and its JSON text.
local function load(id)
  local raw = redis.call('HGET', KEYS[4], id)
  if not raw then return false, false end
  local rec = cjson.decode(raw)
  if rec.x <= now then return false, false end
  return rec, raw
end

-- Forgets records whose time has passed, up to `max` per index and call (max < 0: all), in
-- chunks of at most 1000 ids. Completed and failed: their index score is their expiry. In
-- progress: the score is the lease end and the record lives `retention` after it (the retention
-- of the client that claimed it, so the record itself decides). Writers pass at least twice the
-- number of items they write, so expired records cannot pile up in a group that is in use.
local function purge(retention, max)
  local function chunk(done)
    if max < 0 then return 1000 end
    return math.min(1000, max - done)
  end
  for k = 2, 3 do
    local done = 0
    while chunk(done) > 0 do
      local want = chunk(done)
      local ids = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'LIMIT', 0, want)
      if #ids == 0 then break end
      redis.call('HDEL', KEYS[4], unpack(ids))
      redis.call('ZREM', KEYS[k], unpack(ids))
      done = done + #ids
      if #ids < want then break end
    end
  end
  -- A bounded purge looks at leases that ended this client's retention ago. An unbounded one
  -- (listItems, whose counts must be exact) looks at every lease that ended: a record claimed by
  -- a client with a shorter retention is gone before that, and must not count as abandoned.
  local cutoff = now - retention
  if max < 0 then cutoff = now end
  local done, kept = 0, 0
  while chunk(done) > 0 do
    local want = chunk(done)
    local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'LIMIT', kept, want)
    if #ids == 0 then break end
    local raws = redis.call('HMGET', KEYS[4], unpack(ids))
    local gone = {}
    for j = 1, #ids do
      if not raws[j] or cjson.decode(raws[j]).x <= now then gone[#gone + 1] = ids[j] end
    end
    if #gone > 0 then
      redis.call('HDEL', KEYS[4], unpack(gone))
      redis.call('ZREM', KEYS[1], unpack(gone))
    end
    done = done + #ids
    kept = kept + #ids - #gone
    -- Records kept longer (claimed by a client with a longer retention) stay in front: a bounded
    -- purge stops there, an unbounded one steps over them.
    if (max >= 0 and #gone < #ids) or #ids < want then break end
  end
end

-- Makes every key of the group live at least until `expires` (ms).
local function keep_alive(expires)
  local want = expires - now
  if want <= 0 then return end
  for k = 1, 4 do
    local pttl = redis.call('PTTL', KEYS[k])
    if pttl == -1 or (pttl >= 0 and pttl < want) then redis.call('PEXPIRE', KEYS[k], want) end
  end
end

