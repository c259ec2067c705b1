-- Item Tracker, the compact completed index (docs/redis-compact.md), prepended to the tracker
-- scripts that use it. A counted index of entries (x, id), x an expiry in ms (integer, at most
-- 99999999999999), ordered by x, then by the id's bytes (as ZRANGE orders equal scores):
--   leaves  sorted sets, member the id, score x, each of at most LEAF members so Redis keeps it
--           a listpack (a leaf with no free number to split into grows past LEAF: correct, only
--           less compact); the leaf numbered n is the key `leaf_prefix .. n`;
--   root    a sorted set of every leaf's lower bound, all scored 0 (ordered by bytes):
--           esc(key) .. '\0\0' .. n, key = x as DIGITS decimal digits, then the id; esc doubles
--           every NUL as '\0\1', which keeps the bytes' order, and '\0\0' ends a key below any of
--           its continuations. A leaf holds the entries from its bound up to the next leaf's;
--   tree    a hash: a Fenwick tree of the leaves' counts over leaf numbers (field = number in
--           decimal, value = partial sum; absent = 0: a node that reaches 0 is deleted), and
--           'top', the greatest number made (absent: 0). Its other fields are other code's.
-- Leaf numbers follow the bounds' order, spaced by GAP, so a full leaf splits into a number
-- between its own and the next leaf's; the last one appends at its number + GAP.
-- Everything is in the table `cidx` made by `cidx_lib()` on first use (a script makes every
-- function it defines again on each call, and most calls use none of these); this file defines
-- only `cidx_lib` and its cache. Functions take the key names through a state made by cidx.open. Numbers become text through string.format('%d'), or
-- as redis.call arguments (Redis writes integers exactly), never by concatenation ('1e+14').
-- Every function runs O(log top) commands plus what it returns, pop_expired as many as its `max`.
local cidx_made = false
local function cidx_lib()
  if cidx_made then return cidx_made end
  local cidx = {LEAF = 96, GAP = 1024, DIGITS = 15}

  -- The index's keys (their names are the caller's) and its leaf spacing (`gap`: tests only).
  -- `st.top` caches the tree's top; a caller that read it (with other fields of the hash) may set it.
  function cidx.open(root, tree, leaf_prefix, gap)
    return {root = root, tree = tree, prefix = leaf_prefix, gap = gap or cidx.GAP, top = nil}
  end

  function cidx.leaf_key(st, n)
    return st.prefix .. string.format('%d', n)
  end
  -- An entry's sort key as bytes, escaped for the root (see above). Most ids hold no NUL.
  function cidx.esc_key(x, id)
    local key = string.format('%015d', x) .. id
    if string.find(key, '\0', 1, true) then key = (string.gsub(key, '%z', '\0\1')) end
    return key
  end
  -- A root member's leaf number: its trailing digits (a NUL ends the bound before them).
  function cidx.number(m)
    return tonumber(string.match(m, '(%d+)$'))
  end
  -- The root member of the leaf holding (x, id): the greatest bound at or below it; or nil.
  function cidx.find(st, x, id)
    return redis.call('ZREVRANGEBYLEX', st.root, '[' .. cidx.esc_key(x, id) .. '\0\0\255', '-', 'LIMIT', 0, 1)[1]
  end

  -- The Fenwick tree. Leaf numbers pass 2^31 after enough leaves (GAP * leaves), so its bit
  -- arithmetic is done on doubles (exact up to 2^53) instead of the bit library's 32-bit integers.
  function cidx.top_of(st)
    if st.top == nil then st.top = tonumber(redis.call('HGET', st.tree, 'top')) or 0 end
    return st.top
  end
  -- Appends to `out` the nodes whose sum is prefix(i): i, then i less its lowest set bit, ...
  function cidx.nodes(i, out)
    local p = 1
    while i > 0 do
      if i % (p * 2) ~= 0 then out[#out + 1] = i; i = i - p end
      p = p * 2
    end
    return out
  end
  -- prefix(a) (the entries in leaves numbered at most a) and prefix(b) (b optional), one HMGET.
  function cidx.prefixes(st, a, b)
    local nodes = cidx.nodes(a, {})
    local na = #nodes
    if b then cidx.nodes(b, nodes) end
    if #nodes == 0 then return 0, 0 end
    local fields = {}
    for k = 1, #nodes do fields[k] = string.format('%d', nodes[k]) end
    local vals = redis.call('HMGET', st.tree, unpack(fields))
    local sa, sb = 0, 0
    for k = 1, #nodes do
      local v = tonumber(vals[k]) or 0
      if k <= na then sa = sa + v else sb = sb + v end
    end
    return sa, sb
  end
  -- Adds `delta` to leaf i's count: nodes i, i + lowbit(i), ... up to top (none exists above it).
  function cidx.update(st, i, delta)
    local top = cidx.top_of(st)
    local p = 1
    while i % (p * 2) == 0 do p = p * 2 end
    while i <= top do
      local f = string.format('%d', i)
      if redis.call('HINCRBY', st.tree, f, delta) == 0 then redis.call('HDEL', st.tree, f) end
      i = i + p
      while i % (p * 2) == 0 do p = p * 2 end
    end
  end
  -- Makes leaf number j > top, holding c entries, and makes j the top. The nodes in (top, j] that
  -- cover a number at most top are those on top's update path (top + lowbit(top), ...): each is
  -- set to prefix(top) - prefix(its start), the start being top with its low bits cleared, one of
  -- the points of top's own prefix sum (read in one HMGET). The others cover only numbers above
  -- top, which hold no leaf: 0, but j's own count.
  function cidx.grow(st, j, c)
    local top = cidx.top_of(st)
    local chain = cidx.nodes(top, {})
    local args = {}
    if #chain > 0 then
      local fields = {}
      for k = 1, #chain do fields[k] = string.format('%d', chain[k]) end
      local vals = redis.call('HMGET', st.tree, unpack(fields))
      -- pre[t] = prefix(t) for every t of top's chain, and 0.
      local pre, acc = {[0] = 0}, 0
      for k = #chain, 1, -1 do
        acc = acc + (tonumber(vals[k]) or 0)
        pre[chain[k]] = acc
      end
      local p = 1
      while top % (p * 2) == 0 do p = p * 2 end
      local u = top + p
      while u <= j do
        while u % (p * 2) == 0 do p = p * 2 end
        local v = acc - pre[u - p]
        if u == j then v = v + c; c = 0 end
        if v ~= 0 then
          args[#args + 1] = string.format('%d', u)
          args[#args + 1] = string.format('%d', v)
        end
        u = u + p
      end
    end
    if c ~= 0 then
      args[#args + 1] = string.format('%d', j)
      args[#args + 1] = string.format('%d', c)
    end
    args[#args + 1] = 'top'
    args[#args + 1] = string.format('%d', j)
    redis.call('HSET', st.tree, unpack(args))
    st.top = j
  end
  -- The leaf holding rank r (0-based, r < count) and r's rank inside it: a Fenwick descent, one
  -- HGET per power of two up to top.
  function cidx.descend(st, r)
    local top = cidx.top_of(st)
    local step = 1
    while step * 2 <= top do step = step * 2 end
    local pos = 0
    while step >= 1 do
      if pos + step <= top then
        local v = tonumber(redis.call('HGET', st.tree, string.format('%d', pos + step))) or 0
        if v <= r then pos = pos + step; r = r - v end
      end
      step = step / 2
    end
    return pos + 1, r
  end

  -- Gives a leaf an expiry of at least t (never shortened): GT, or NX when it had none. Returns
  -- true when it had none, so this call's ZADD made the key: a leaf the root still names whose
  -- key expired (a new leaf is given its expiry directly). t must be in the future.
  function cidx.keep(lk, t)
    if redis.call('PEXPIREAT', lk, t, 'GT') == 1 then return false end
    return redis.call('PEXPIREAT', lk, t, 'NX') == 1
  end

  -- Moves the upper half of leaf `leaf` (root member `member`, key `lk`, n members) into a new
  -- leaf numbered between its own and the next leaf's, if one is free (else it stays, larger).
  -- At most LEAF members move, so a leaf that grew large splits a slice per add, in bounded work.
  function cidx.split(st, leaf, member, lk, n)
    local nxt = redis.call('ZRANGEBYLEX', st.root, '(' .. member, '+', 'LIMIT', 0, 1)[1]
    local j = leaf + st.gap
    if nxt then
      -- Numbers follow the bounds, so leaf < b and j < b: none is free when b = leaf + 1.
      j = math.floor((leaf + cidx.number(nxt)) / 2)
      if j <= leaf then return end
    end
    local keep = math.max(math.floor(n / 2), n - cidx.LEAF)
    local moved = redis.call('ZRANGE', lk, keep, -1, 'WITHSCORES')
    local args = {}
    for k = 1, #moved, 2 do
      args[k] = moved[k + 1]
      args[k + 1] = moved[k]
    end
    local nk = cidx.leaf_key(st, j)
    redis.call('ZADD', nk, unpack(args))
    redis.call('ZREMRANGEBYRANK', lk, keep, -1)
    redis.call('ZADD', st.root, 0, cidx.esc_key(tonumber(moved[2]), moved[1]) .. '\0\0' .. string.format('%d', j))
    -- The new leaf lives as long as the old one (given at least keep_until by the add): it holds
    -- the old one's latest entries.
    local t = redis.call('PEXPIRETIME', lk)
    if t > 0 then redis.call('PEXPIREAT', nk, t) end
    local c = #moved / 2
    cidx.update(st, leaf, -c)
    if j > cidx.top_of(st) then cidx.grow(st, j, c) else cidx.update(st, j, c) end
  end

  -- Adds (x, id), which the caller knows is absent (and id in no other entry); the leaf it goes
  -- in lives at least until `keep_until` (absolute ms, in the future: the entry's expiry and a
  -- slack). Returns how many entries were dropped unseen: those of a leaf whose key had expired
  -- (0 but in that case; see pop_expired), and whether the index was empty (this add made the
  -- root: the caller gives it and the tree their expiry).
  function cidx.add(st, x, id, keep_until)
    local member, leaf, made = cidx.find(st, x, id), nil, false
    if member then
      leaf = cidx.number(member)
    else
      -- Below every bound: the first leaf takes it and its bound is lowered. No leaf at all:
      -- every node is 0 (absent), so the numbering starts again at GAP.
      local first = redis.call('ZRANGE', st.root, 0, 0)[1]
      if first then
        leaf = cidx.number(first)
        redis.call('ZREM', st.root, first)
      else
        leaf, made, st.top = st.gap, true, 0
      end
      member = cidx.esc_key(x, id) .. '\0\0' .. string.format('%d', leaf)
      redis.call('ZADD', st.root, 0, member)
    end
    local lk = cidx.leaf_key(st, leaf)
    redis.call('ZADD', lk, x, id)
    local dropped = 0
    if made then
      redis.call('PEXPIREAT', lk, keep_until)
      cidx.grow(st, leaf, 1)
    else
      local delta = 1
      if cidx.keep(lk, keep_until) then
        -- The leaf's key had expired (its entries with it): it holds this entry alone now.
        local a, b = cidx.prefixes(st, leaf, leaf - 1)
        dropped = a - b
        delta = 1 - dropped
      end
      if delta ~= 0 then cidx.update(st, leaf, delta) end
    end
    local n = redis.call('ZCARD', lk)
    if n > cidx.LEAF then cidx.split(st, leaf, member, lk, n) end
    return dropped, made
  end

  -- Appends entries that sort above every entry of the index (the caller knows: their expiry is
  -- above the greatest one), `flat` = {id1, x1, id2, x2, ...} in order: the last leaf is filled
  -- up to LEAF, then new leaves of LEAF entries each are made after it. Per leaf one ZADD, one
  -- PEXPIREAT (at its greatest expiry, never shortened) and its Fenwick update; so a batch costs a
  -- few commands per LEAF entries, where adds cost about six each.
  function cidx.append(st, flat)
    local n = #flat / 2
    if n == 0 then return end
    local pos = 1
    local last = redis.call('ZRANGE', st.root, -1, -1)[1]
    if last then
      local leaf = cidx.number(last)
      local lk = cidx.leaf_key(st, leaf)
      local count = redis.call('ZCARD', lk)
      if count == 0 then
        -- Its key expired (see pop_expired): its count leaves the tree, it is filled again.
        local a, b = cidx.prefixes(st, leaf, leaf - 1)
        if a - b ~= 0 then cidx.update(st, leaf, b - a) end
      end
      local k = math.min(cidx.LEAF - count, n)
      if k > 0 then
        local args = {}
        for q = 1, k do
          args[2 * q - 1] = flat[2 * q]
          args[2 * q] = flat[2 * q - 1]
        end
        redis.call('ZADD', lk, unpack(args))
        cidx.keep(lk, flat[2 * k])
        cidx.update(st, leaf, k)
        pos = k + 1
      end
    end
    while pos <= n do
      local k = math.min(cidx.LEAF, n - pos + 1)
      local j = cidx.top_of(st) + st.gap
      local nk = cidx.leaf_key(st, j)
      local args = {}
      for q = 1, k do
        local at = 2 * (pos + q - 1)
        args[2 * q - 1] = flat[at]
        args[2 * q] = flat[at - 1]
      end
      redis.call('ZADD', nk, unpack(args))
      redis.call('PEXPIREAT', nk, flat[2 * (pos + k - 1)])
      redis.call('ZADD', st.root, 0, cidx.esc_key(flat[2 * pos], flat[2 * pos - 1]) .. '\0\0' .. string.format('%d', j))
      cidx.grow(st, j, k)
      pos = pos + k
    end
  end

  -- Removes (x, id) if it is there (an id with another expiry is not): 1, else 0. A leaf emptied
  -- leaves the root (Redis deleted its key); leaves are not merged.
  function cidx.remove(st, x, id)
    local member = cidx.find(st, x, id)
    if not member then return 0 end
    local leaf = cidx.number(member)
    local lk = cidx.leaf_key(st, leaf)
    if tonumber(redis.call('ZSCORE', lk, id)) ~= x then return 0 end
    redis.call('ZREM', lk, id)
    if redis.call('EXISTS', lk) == 0 then redis.call('ZREM', st.root, member) end
    cidx.update(st, leaf, -1)
    return 1
  end

  -- The number of entries (those of expired leaf keys included, until pop_expired drops them).
  function cidx.count(st)
    return (cidx.prefixes(st, cidx.top_of(st)))
  end

  -- The number of entries with x <= now: all in the leaves up to the last whose bound is at most
  -- (now, any id), less those above now in that leaf. A leaf whose key expired held only entries
  -- below now (its expiry outlived each), and counts them all.
  function cidx.expired(st, now)
    now = math.floor(now)
    if now < 0 then return 0 end
    -- Every x is at most 99999999999999: a later now counts them all, and now + 1 keeps 15 digits.
    if now > 99999999999999 then now = 99999999999999 end
    local m = redis.call('ZREVRANGEBYLEX', st.root, '(' .. string.format('%015d', now + 1), '-', 'LIMIT', 0, 1)[1]
    if not m then return 0 end
    local leaf = cidx.number(m)
    local upto = cidx.prefixes(st, leaf)
    return upto - redis.call('ZCOUNT', cidx.leaf_key(st, leaf), '(' .. string.format('%d', now), '+inf')
  end

  -- The entries of ranks [first, first + n) (0-based, in order): {id1, x1, id2, x2, ...}. The
  -- entries of a leaf whose key expired are unknown (and expired): their ranks are skipped, so the
  -- list is shorter.
  function cidx.range(st, first, n)
    local out = {}
    if n <= 0 or first < 0 then return out end
    local total = cidx.count(st)
    if first >= total then return out end
    local want = math.min(n, total - first)
    local leaf, r = cidx.descend(st, first)
    while want > 0 do
      local got = redis.call('ZRANGE', cidx.leaf_key(st, leaf), r, r + want - 1, 'WITHSCORES')
      if #got > 0 then
        for k = 1, #got, 2 do
          out[#out + 1] = got[k]
          out[#out + 1] = tonumber(got[k + 1])
        end
        want = want - #got / 2
        if want <= 0 then break end
        -- The leaf ended: the next one has the least bound above its last entry.
        local m = redis.call('ZRANGEBYLEX', st.root,
          '(' .. cidx.esc_key(tonumber(got[#got]), got[#got - 1]) .. '\0\0\255', '+', 'LIMIT', 0, 1)[1]
        if not m then break end
        leaf, r = cidx.number(m), 0
      else
        -- The leaf's key expired: skip its ranks and find the leaf after them.
        local upto, before = cidx.prefixes(st, leaf, leaf - 1)
        want = want - (upto - before - r)
        if want <= 0 or upto >= total then break end
        leaf, r = cidx.descend(st, upto)
      end
    end
    return out
  end

  -- Removes up to `max` entries with x <= now, lowest first. Returns their ids, and how many
  -- entries were dropped unseen: a leaf the root names whose key expired (the group was idle past
  -- the leaves' slack) loses its count from the tree and its bound; its ids are unknown (all
  -- expired), and its entries count toward `max`.
  function cidx.pop_expired(st, now, max)
    local ids, done, dropped = {}, 0, 0
    while done < max do
      local m = redis.call('ZRANGE', st.root, 0, 0)[1]
      if not m then break end
      local leaf = cidx.number(m)
      local lk = cidx.leaf_key(st, leaf)
      local want = max - done
      -- One more than wanted: when every entry read is taken, the leaf is empty.
      local got = redis.call('ZRANGE', lk, 0, want, 'WITHSCORES')
      if #got == 0 then
        local upto, before = cidx.prefixes(st, leaf, leaf - 1)
        local c = upto - before
        if c ~= 0 then cidx.update(st, leaf, -c) end
        redis.call('ZREM', st.root, m)
        dropped = dropped + c
        done = done + math.max(c, 1)
      else
        local k = 0
        while k < want and k * 2 < #got and tonumber(got[k * 2 + 2]) <= now do
          ids[#ids + 1] = got[k * 2 + 1]
          k = k + 1
        end
        if k > 0 then
          redis.call('ZREMRANGEBYRANK', lk, 0, k - 1)
          cidx.update(st, leaf, -k)
          done = done + k
        end
        -- Stopped inside the leaf: at an entry above now, or at max.
        if k * 2 < #got then break end
        redis.call('ZREM', st.root, m)
      end
    end
    return ids, dropped
  end

  -- The lowest x, or false when empty. When the first leaf's key expired: its bound's x, at most
  -- any it held (a lower bound, so a purge runs and drops that leaf).
  function cidx.head(st)
    local m = redis.call('ZRANGE', st.root, 0, 0)[1]
    if not m then return false end
    local got = redis.call('ZRANGE', cidx.leaf_key(st, cidx.number(m)), 0, 0, 'WITHSCORES')
    if got[2] then return tonumber(got[2]) end
    return tonumber(string.sub(m, 1, cidx.DIGITS))
  end

  -- The greatest entry: its x and id; false when empty. When the last leaf's key expired, its
  -- bound's x and no id: every entry is expired then (all lie below the entries of that leaf,
  -- which expired).
  function cidx.tail(st)
    local m = redis.call('ZRANGE', st.root, -1, -1)[1]
    if not m then return false end
    local got = redis.call('ZRANGE', cidx.leaf_key(st, cidx.number(m)), -1, -1, 'WITHSCORES')
    if got[2] then return tonumber(got[2]), got[1] end
    return tonumber(string.sub(m, 1, cidx.DIGITS))
  end
  cidx_made = cidx
  return cidx
end
