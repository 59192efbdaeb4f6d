-- queue_forget: drop the record of pods that are bound. Only pods outside every waiting
-- sub-queue are forgotten (handed off '' or 'assumed', or still inflight under a lease
-- whose reclaim would requeue a bound pod); pods waiting in a queue need queue_delete.
--
-- KEYS[1]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  inflight  member ns/name
-- ARGV[1..n]  str  pod keys (ns/name)
-- Returns: integer, the number of pods forgotten.

--!include queue_record

local forgotten = 0
for i = 1, #ARGV do
  local r = rec_decode(redis.call('HGET', KEYS[1], ARGV[i]))
  if r and (r.w == '' or r.w == 'assumed' or r.w == 'inflight') then
    redis.call('ZREM', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[1], ARGV[i])
    forgotten = forgotten + 1
  end
end
return forgotten
