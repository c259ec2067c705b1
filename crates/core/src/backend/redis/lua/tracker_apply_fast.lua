-- Item Tracker: the fast path of tracker_apply.lua, run before tracker_common.lua's functions are
-- made (a script makes every function it defines again on each call) and with far fewer Lua
-- instructions than the general path: one claim of an item that has no record (in the records
-- hash nor in its record bucket), or the completion (staged) or failure of a first attempt (a
-- live record in progress, no last error, the timeline its fields imply) by its owner (or
-- without an owner check), when
-- nothing else is due: the bookkeeping (see tracker_common.lua) shows nothing to clean up, the
-- write lowers no bound, the keys' expiry needs no change (`keep_alive` would do nothing) and the
-- timeline drops no entry. Every other case goes on to the general path, which is handed this
-- read (`pre_read`) and would write and reply exactly this for these cases: the fast path is a
-- shortcut, never a rule of its own. tracker.rs's tests run both paths.
local pre_read = false
if #ARGV == 8 then
  local action, id, owner = ARGV[3], ARGV[4], ARGV[5]
  pre_read = redis.call('HMGET', KEYS[4], META, ARGV[4])
  local md, ml, mk, rest = string.match(pre_read[1] or '', '^(%d+) (%d+) (%d+)(.*)$')
  -- With compact keys (tracker_common.lua, `compact`): their generation and the buckets'
  -- level and split pointer, so a claim of an id the records hash lacks looks in its bucket.
  -- (Bookkeeping without them, of an earlier version: the general path reads them.)
  local gen, bk, bs, ct = 0, 0, 0, 0
  local g, k, sp, top = string.match(rest or '', '^ (%d+) (%d+) (%d+) %d+ %d+ %d+ (%d+)$')
  if g then gen, bk, bs, ct = tonumber(g), tonumber(k), tonumber(sp), tonumber(top) else md = nil end
  local retention = tonumber(ARGV[1])
  md, ml, mk = tonumber(md), tonumber(ml), tonumber(mk)
  if md and md > now and ml > now - retention and mk > now then
    local raw = pre_read[2]
    -- The index the item goes to and the one it leaves (0: none), its score there, the record.
    local which, was, expires, packed = false, 0, 0, false
    -- Shortcuts of rules::tracker::claim (an item with no record is taken) and
    -- rules::tracker::owns (Rust).
    if action == 'c' then
      local lease_end = now + tonumber(ARGV[6])
      -- (Not with a maxAttempts nor a note, even an empty one (':'): '1' or '' alone.)
      local found = false
      if not raw and gen > 0 then
        local h = struct.unpack('<I4', ARGV[8])
        local b = h % 2 ^ bk
        if b < bs then b = h % 2 ^ (bk + 1) end
        found = redis.call('HEXISTS', KEYS[6] .. ':b:' .. string.format('%d:%d', gen, b), id) == 1
      end
      if not raw and not found and lease_end >= ml and tonumber(ARGV[2]) >= 1 and (ARGV[7] == '' or ARGV[7] == '1') then
        -- A new record: attempt 1 claimed now, the timeline it implies (count 0).
        which, expires = 1, lease_end + retention
        packed = struct.pack(HEAD .. 'I6', 'p', 1, now, now, expires, lease_end) .. owner_field(owner) .. '-\0'
      end
    elseif (action == 'd' or action == 'f') and raw and string.byte(raw, 1) == 112 then
      -- Only the first attempt's completion, by its owner or without an owner check, of a record
      -- whose timeline is the implied one: the record it writes implies its timeline too.
      local _, a, c, _, x, pos = struct.unpack(HEAD, raw)
      pos = pos + 6
      local kind, o = string.byte(raw, pos), '-'
      if kind == 104 then o = string.sub(raw, pos, pos + 16) end
      local keep_until = math.min(now + tonumber(ARGV[6]), NEVER)
      -- No last error ('-') and the implied timeline (count 0) end the record.
      local at = pos + #o
      -- (A record with a maxAttempts has 'm' where the owner is: not this path; nor a completion
      -- with a result, nor a record with a note, which is longer.)
      if a == 1 and (action == 'f' or ARGV[7] == '') and kind ~= 116 and kind ~= 109 and x > now and (owner == '' or o == owner_field(owner))
        and #raw == at + 1 and string.byte(raw, at) == 45 and string.byte(raw, at + 1) == 0
        and tonumber(ARGV[2]) >= 2 and keep_until >= md
        -- A completion is staged (see STAGE, tracker_common.lua): only one expiring after the
        -- compact index's greatest entry, and not one in 128 (by the id's hash), which the general
        -- path takes, so staged completions are moved into the compact layout from time to time.
        and (action == 'f' or (keep_until > ct and struct.unpack('<I4', ARGV[8]) % 128 ~= 0)) then
        was, which, expires = 1, 2, keep_until
        local status, err = 'c', '-'
        if action == 'f' then
          status, which, err = 'f', 3, struct.pack('<c1I4', 'e', #ARGV[7]) .. ARGV[7]
        end
        packed = struct.pack(HEAD, status, 1, c, now, expires) .. o .. err .. '\0'
      end
    end
    -- keep_alive's test (tracker_common.lua): the keys' expiry already covers the record, by no
    -- more than twice the slack.
    if which and expires <= mk and mk <= expires + 2 * math.max(1000, math.floor((expires - now) / 8)) then
      local score = expires
      if which == 1 then score = now + tonumber(ARGV[6]) end
      redis.call('HSET', KEYS[4], id, packed)
      if was > 0 and was ~= which then redis.call('ZREM', KEYS[was], id) end
      local added = redis.call('ZADD', KEYS[which], score, id, 'inf', END)
      if added > (was == which and 0 or 1) then
        redis.call('PEXPIREAT', KEYS[which], string.format('%d', mk))
      end
      return {now, 1, '', packed}
    end
  end
end
