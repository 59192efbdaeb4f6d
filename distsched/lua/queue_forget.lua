-- queue_forget: drop the info of pods that are bound. Only pods outside every waiting
-- sub-queue are forgotten (handed off '' or 'assumed', or still inflight under a lease
-- whose reclaim would requeue a bound pod); pods waiting in a queue need queue_delete.
--
-- KEYS[1]  hash  info      ns/name -> JSON info
-- KEYS[2]  zset  inflight  member ns/name
-- ARGV[1..n]  str  pod keys (ns/name)
-- Returns: integer, the number of pods forgotten.

local forgotten = 0
for i = 1, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local w = cjson.decode(raw).w
    if w == '' or w == 'assumed' or w == 'inflight' then
      redis.call('ZREM', KEYS[2], ARGV[i])
      redis.call('HDEL', KEYS[1], ARGV[i])
      forgotten = forgotten + 1
    end
  end
end
return forgotten
