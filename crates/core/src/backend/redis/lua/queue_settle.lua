-- Dedup Queue: ack (ARGV[3] = 'a') or release (ARGV[3] = 'r', due again after ARGV[4] ms) ids of
-- one shard held by the owner token ARGV[2]. ARGV[5..]: ids. Expired claims are judged before they
-- are returned to waiting. Reply: the change of the shard's state (see tidy), then per id a code
-- (1 done, 2 done and the id waits again because it was enqueued while claimed, 0 not claimed, -1
-- another owner, -2 expired) and the due time when the id is waiting again after this call, else
-- -1.
local owner, ack, delay = ARGV[2], ARGV[3] == 'a', tonumber(ARGV[4])
local out = {1}
for i = 5, #ARGV do
  local id = ARGV[i]
  local code, at = 0, -1
  local deadline = redis.call('ZSCORE', C, id)
  if deadline then
    if redis.call('HGET', O, id) ~= owner then
      code = -1
    elseif tonumber(deadline) <= now then
      code = -2
    else
      redis.call('ZREM', C, id)
      redis.call('HDEL', O, id)
      local a = redis.call('ZSCORE', A, id)
      if a then redis.call('ZREM', A, id) end
      code = 1
      if a then code = 2 end
      if ack then
        if a then
          at = tonumber(a)
          redis.call('ZADD', W, fmt(at), id)
        end
      else
        at = now + delay
        if a and tonumber(a) > at then at = tonumber(a) end
        redis.call('ZADD', W, fmt(at), id)
      end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = at
end
reap(#ARGV - 4)
out[1] = tidy()
return out
