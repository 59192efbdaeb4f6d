-- queue_done: pods left the queue's care (bound meanwhile: the worker found the pod's
-- object bound). Only the holder of a pod's current lease may say so: the epoch must match
-- and the pod be inflight. Each pod of the batch is judged on its own; its deliveries
-- count is reset.
--
-- KEYS[1]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  inflight  member ns/name, score lease deadline (ms)
-- ARGV[2i-1]  str  key     ns/name
-- ARGV[2i]    int  epoch   lease epoch returned by the pop
-- Returns: array of 1 (accepted) or 0 (stale lease or unknown pod), one per pair.

--!include queue_record

if #ARGV % 2 ~= 0 then return redis.error_reply('queue_done: expects key, epoch pairs') end
for i = 2, #ARGV, 2 do
  if not tonumber(ARGV[i]) then return redis.error_reply('queue_done: epoch must be a number') end
end
local accepted = {}
for i = 1, #ARGV, 2 do
  local key, epoch = ARGV[i], tonumber(ARGV[i + 1])
  local r = rec_decode(redis.call('HGET', KEYS[1], key))
  if r and r.w == 'inflight' and r.e == epoch then
    redis.call('ZREM', KEYS[2], key)
    r.w = ''
    r.d = 0
    redis.call('HSET', KEYS[1], key, rec_encode(r))
    accepted[#accepted + 1] = 1
  else
    accepted[#accepted + 1] = 0
  end
end
return accepted
