-- Semaphore (layout 2): KEYS[1] holders (sorted set: owner -> lease end, ms on this server's clock),
-- KEYS[2] the fence counter, the last fence granted, made and kept as a lock's (redis/lock.rs):
-- fencing tokens strictly increase across releases, expiries, the counter's own expiry and a loss
-- of its last writes (each is at least the Redis clock in µs). KEYS[3] (acquire, release,
-- extend) the caller's permit: a string "<fence>:<label>" that Redis expires one ms before its
-- lease ends (PXAT end - 1: gone from the lease's end on, as rules::lock::holds has it), so a
-- release or an extension learns from the key alone whether the lease still holds, without the
-- clock. A holder's entry in KEYS[1] and its permit key are written and removed together; an
-- acquisition first drops the ended entries (one ZREMRANGEBYSCORE), so the holders' key keeps at
-- most `permits` entries after it (readers do not count ended ones either).
-- A key holding a value flowguard did not write is found by the first command that touches it
-- (redis.pcall answers WRONGTYPE), before anything is written: no TYPE probe per call.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Whether a redis.pcall reply is an error (WRONGTYPE: a foreign key).
local function failed(r) return type(r) == 'table' and r.err ~= nil end
-- The fence counter's value (0 when there is none), or nil when it is not a number flowguard wrote.
local function last_fence()
  local f = redis.pcall('GET', KEYS[2])
  if f and (type(f) ~= 'string' or not string.match(f, '^%d+$')) then return nil end
  return tonumber(f or '0')
end
