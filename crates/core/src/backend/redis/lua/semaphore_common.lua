-- Semaphore: KEYS[1] holders (sorted set: owner -> lease end, ms on this server's clock),
-- KEYS[2] info (hash: owner -> "<fence>:<label>", and two fields no owner token can be: `fence`,
-- the last fencing token issued, and `until`, when both keys expire, ms). Both keys live until
-- `until`, which is past every live lease: it is moved (both keys given it) only when a lease
-- would end after it, to one lease past that end, so most calls set no expiry; a holders' key
-- made anew gets it too. The counter lives as long as the info: when the keys expired it is made
-- anew from the clock, as a lock's (redis/lock.rs), so fencing tokens strictly increase across
-- releases, lease ends and the keys' expiry. Holders whose lease ended are dropped when the first
-- lease has ended.
-- A key holding a value flowguard did not write is found by the first command that touches it
-- (redis.pcall answers WRONGTYPE), before anything is written: no TYPE probe per call.
-- The server's clock (TIME), read by each step that needs it: `time` as TIME answers, `now` in ms.
local time, now
local function clock()
  time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
-- Whether a redis.pcall reply is an error (WRONGTYPE: a foreign key).
local function failed(r) return type(r) == 'table' and r.err ~= nil end
-- The first holder {owner, lease end} (an empty table when none), or nil for a foreign holders' key.
local function first()
  local f = redis.pcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if failed(f) then return nil end
  return f
end
-- Drops the holders whose lease ended, when the first one's has (`head`: first()). Returns
-- the first live holder after it, or nil and the index of a foreign key (nothing changed).
local function sweep(head)
  if not head then return nil, 1 end
  if #head == 0 or tonumber(head[2]) > now then return head end
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  -- The info first: a foreign info key refuses before the holders change.
  if failed(redis.pcall('HDEL', KEYS[2], unpack(gone))) then return nil, 2 end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  return redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
end
-- `fence` and `until` of the info, as numbers (nil when missing), or false when the info key or
-- a field holds something flowguard did not write.
local function info()
  local v = redis.pcall('HMGET', KEYS[2], 'fence', 'until')
  if failed(v) then return false end
  for i = 1, 2 do
    if v[i] and not string.match(v[i], '^%d+$') then return false end
    v[i] = v[i] and tonumber(v[i])
  end
  return v
end
-- The keys' new expiry for a lease ending at `e`, given the current one (`till`, nil when none):
-- one lease past `e` when `e` is past `till`, else nil (kept).
local function deadline(e, lease, till)
  if till and e <= till then return nil end
  return e + lease
end
-- Gives both keys the new expiry `t`, or when it is kept (nil) a holders' key made anew (`fresh`)
-- the current one, `till`. Called after the writes: an expiry on a key not yet made is lost.
local function expire(t, till, fresh)
  if t then
    redis.call('PEXPIREAT', KEYS[1], t)
    redis.call('PEXPIREAT', KEYS[2], t)
  elseif fresh then
    redis.call('PEXPIREAT', KEYS[1], till)
  end
end
