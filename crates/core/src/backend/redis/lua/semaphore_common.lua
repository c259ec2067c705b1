-- Semaphore: KEYS[1] holders (sorted set: owner -> lease end, ms on this server's clock),
-- KEYS[2] holder info (hash: owner -> "<fence>:<label>"), KEYS[3] the fence counter, made and
-- kept as a lock's (redis/lock.rs): fencing tokens strictly increase across releases, expiries
-- and the counter's own expiry. Holders whose lease ended are dropped first.
-- A key holding a value flowguard did not write is found by the first command that touches it
-- (redis.pcall answers WRONGTYPE), before anything is written: no TYPE probe per call.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Whether a redis.pcall reply is an error (WRONGTYPE: a foreign key).
local function failed(r) return type(r) == 'table' and r.err ~= nil end
-- Drops the holders whose lease ended. Returns the index of a foreign key (nothing changed), or nil.
local function sweep()
  local gone = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if failed(gone) then return 1 end
  if #gone > 0 then
    -- The info first: a foreign info key refuses before the holders change.
    if failed(redis.pcall('HDEL', KEYS[2], unpack(gone))) then return 2 end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  end
  return nil
end
-- Both keys live as long as the longest lease. `fresh`: the holders' key was just made (no
-- lifetime yet); otherwise both keys already live at least as long as every live lease (each
-- lease that ends later gave them its end), so a lifetime only ever grows (PEXPIRE GT).
local function keep(ms, fresh)
  if fresh then
    redis.call('PEXPIRE', KEYS[1], ms)
    redis.call('PEXPIRE', KEYS[2], ms)
  else
    redis.call('PEXPIRE', KEYS[1], ms, 'GT')
    redis.call('PEXPIRE', KEYS[2], ms, 'GT')
  end
end
-- The fence counter's value (0 when there is none), or nil when it is not a number flowguard wrote.
local function last_fence()
  local f = redis.pcall('GET', KEYS[3])
  if f and (type(f) ~= 'string' or not string.match(f, '^%d+$')) then return nil end
  return tonumber(f or '0')
end
