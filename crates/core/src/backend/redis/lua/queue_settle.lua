-- Dedup Queue: ack (ARGV[4] = 'a') or release (ARGV[4] = 'r', due again after ARGV[5] ms) ids of
-- one shard held by the owner token ARGV[3]. ARGV[6..]: ids. Expired claims are judged before they
-- are returned to waiting. Reply after the head (see queue_common.lua): per id a code (1 done, 2
-- done and the id waits again because it was enqueued while claimed, 0 not claimed, -1 another
-- owner, -2 expired) and the due time when the id is waiting again after this call, else -1.
local owner, ack, delay = ARGV[3], ARGV[4] == 'a', tonumber(ARGV[5])
local out = {0, 0, 0}
-- Whether an id left the shard (acked, not enqueued again): only then may it hold none now.
local gone = false
for i = 6, #ARGV do
  local id = ARGV[i]
  local code, at = 0, -1
  local deadline = had and redis.call('ZSCORE', C, id)
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
        else
          gone = true
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
reap(#ARGV - 5)
local holds = had
if gone then holds = redis.call('EXISTS', W, C, A) > 0 end
return finish(out, holds)
