-- Semaphore: KEYS[1] holders (sorted set: owner -> lease end, ms on this server's clock),
-- KEYS[2] holder info (hash: owner -> "<fence>:<label>"), KEYS[3] the fence counter, made and
-- kept as a lock's (redis/lock.rs): fencing tokens strictly increase across releases, expiries
-- and the counter's own expiry. Holders whose lease ended are dropped first.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function foreign()
  local a, b = redis.call('TYPE', KEYS[1]).ok, redis.call('TYPE', KEYS[2]).ok
  if a ~= 'none' and a ~= 'zset' then return 1 end
  if b ~= 'none' and b ~= 'hash' then return 2 end
  return nil
end
local function sweep()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    redis.call('HDEL', KEYS[2], unpack(gone))
  end
end
-- Both keys live as long as the longest lease.
local function keep()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    local ttl = tonumber(last[2]) - now
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
